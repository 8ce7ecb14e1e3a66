/* Uses only the installed public headers and libdeputy: opens a mover,
 * copies a buffer, checks the bytes and the completion record. */
#include <deputy/deputy.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    unsigned char src[4096], dst[4096];
    for (size_t i = 0; i < sizeof(src); ++i) src[i] = (unsigned char)(i * 7 + 1);
    memset(dst, 0, sizeof(dst));

    dp_mover_t *mover = NULL;
    dp_status_t s = dp_mover_open(NULL, &mover);
    if (s != DP_OK) {
        fprintf(stderr, "dp_mover_open: %s\n", dp_strerror(s));
        return 1;
    }
    dp_completion_t comp;
    memset(&comp, 0, sizeof(comp));
    dp_desc_t desc;
    memset(&desc, 0, sizeof(desc));
    desc.opcode = DP_OP_MEMMOVE;
    desc.flags = DP_FLAG_COMPLETION;
    desc.completion = (uint64_t)(uintptr_t)&comp;
    desc.src = (uint64_t)(uintptr_t)src;
    desc.dst = (uint64_t)(uintptr_t)dst;
    desc.size = sizeof(src);
    desc.user = 42;
    if ((s = dp_mover_submit(mover, 0, &desc)) != DP_OK ||
        (s = dp_mover_wait(mover, &comp, DP_WAIT_BLOCK, 5000000000LL)) != DP_OK) {
        fprintf(stderr, "mover: %s\n", dp_strerror(s));
        return 1;
    }
    int ok = comp.status == DP_COMP_SUCCESS && comp.user == 42 &&
             comp.bytes_completed == sizeof(src) && memcmp(src, dst, sizeof(src)) == 0;
    dp_mover_close(mover);
    printf("consumer: deputy %s, memmove %s\n", dp_version(), ok ? "OK" : "WRONG");
    return ok ? 0 : 1;
}
