/* What `deputy mpirun` gave one rank, as one line on stdout
 * (tests/launch/test_mpirun_cli.py parses it):
 *
 *   rank R size S pid P agent PATH listening 0|1 preload LIST loaded 0|1
 *   parent-preload 0|1 secret 0|1 same-secret 0|1 report VALUE
 *
 * agent: DEPUTY_AGENT ("-" when unset); listening: it names a socket;
 * preload: LD_PRELOAD ("-" when unset); loaded: its first entry is mapped
 * into this process (/proc/self/maps); parent-preload: the rank's parent
 * (mpirun's daemon, not a rank) has that library in its own LD_PRELOAD;
 * secret: DEPUTY_JOB_SECRET is set (deputy mpirun sets none: the library
 * makes the job's); same-secret: it equals rank 0's on every rank
 * (broadcast and reduced with MPI); report: DEPUTY_MPI_REPORT.
 *
 * Arguments: `exit CODE RANK` makes rank RANK return CODE after
 * MPI_Finalize; `sleep SECONDS` makes every rank sleep before it (after
 * printing its line).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *env_or_dash(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : "-";
}

/* The first entry of a ':' or ' ' separated LD_PRELOAD. */
static void first_entry(const char *list, char *out, size_t size) {
    size_t n = strcspn(list, ": ");
    if (n >= size) n = size - 1;
    memcpy(out, list, n);
    out[n] = '\0';
}

static int file_mentions(const char *path, const char *needle, char separator) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* environ entries are NUL-separated: make them lines */
    for (size_t i = 0; i < n; ++i)
        if (buf[i] == separator) buf[i] = '\n';
    return strstr(buf, needle) != NULL;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    const char *agent = env_or_dash("DEPUTY_AGENT");
    struct stat st;
    const int listening = stat(agent, &st) == 0 && S_ISSOCK(st.st_mode);
    const char *preload = env_or_dash("LD_PRELOAD");
    char lib[4096] = "";
    first_entry(preload, lib, sizeof lib);
    const int loaded = lib[0] != '-' && file_mentions("/proc/self/maps", lib, '\0');
    char parent_environ[64], needle[4200];
    snprintf(parent_environ, sizeof parent_environ, "/proc/%d/environ", (int)getppid());
    snprintf(needle, sizeof needle, "LD_PRELOAD=%s", lib);
    const int parent_preload = lib[0] != '-' && file_mentions(parent_environ, needle, '\0');

    char secret[128] = "", root_secret[128] = "";
    const char *s = getenv("DEPUTY_JOB_SECRET");
    if (s) snprintf(secret, sizeof secret, "%s", s);
    memcpy(root_secret, secret, sizeof secret);
    MPI_Bcast(root_secret, sizeof root_secret, MPI_CHAR, 0, MPI_COMM_WORLD);
    int same = s != NULL && strcmp(secret, root_secret) == 0, all_same = 0;
    MPI_Allreduce(&same, &all_same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);

    printf("rank %d size %d pid %d agent %s listening %d preload %s loaded %d parent-preload %d "
           "secret %d same-secret %d report %s\n",
           rank, size, (int)getpid(), agent, listening, preload, loaded, parent_preload, s != NULL,
           all_same, env_or_dash("DEPUTY_MPI_REPORT"));
    fflush(stdout);

    int code = 0;
    for (int i = 1; i + 1 < argc; ++i) {
        if (strcmp(argv[i], "sleep") == 0) sleep((unsigned)atoi(argv[i + 1]));
        if (strcmp(argv[i], "exit") == 0 && i + 2 < argc && atoi(argv[i + 2]) == rank)
            code = atoi(argv[i + 1]);
    }
    MPI_Finalize();
    return code;
}
