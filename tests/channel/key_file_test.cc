// Key files: generate and load, and every refusal (other users may read it,
// malformed, missing, never overwritten) with its exact status.
#include "channel/key_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

namespace deputy::channel::secure {
namespace {

std::string temp_file(const std::string &name) {
    std::string path = ::testing::TempDir() + "deputy_key_" + std::to_string(getpid()) + "_" + name;
    unlink(path.c_str());
    return path;
}

void write_file(const std::string &path, const std::string &text, mode_t mode) {
    std::ofstream(path) << text;
    chmod(path.c_str(), mode);
}

TEST(KeyFile, GenerateThenLoad) {
    const std::string path = temp_file("gen");
    ASSERT_EQ(generate_key_file(path), DP_OK);
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    Key a, b;
    ASSERT_EQ(load_key_file(path, &a), DP_OK);
    ASSERT_EQ(load_key_file(path, &b), DP_OK);
    EXPECT_EQ(a.bytes, b.bytes);
    EXPECT_NE(a.bytes, Key().bytes);                // not all zero
    EXPECT_EQ(generate_key_file(path), DP_ERR_IO);  // never overwritten
    Key c;
    ASSERT_EQ(load_key_file(path, &c), DP_OK);
    EXPECT_EQ(a.bytes, c.bytes);
    const std::string other = temp_file("gen2");
    ASSERT_EQ(generate_key_file(other), DP_OK);
    ASSERT_EQ(load_key_file(other, &c), DP_OK);
    EXPECT_NE(a.bytes, c.bytes);
    unlink(path.c_str());
    unlink(other.c_str());
}

TEST(KeyFile, DocumentedFormatWithComments) {
    const std::string path = temp_file("fmt");
    write_file(path,
               "# made by hand\n\ndeputy-psk-v1 "
               "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\r\n",
               0600);
    Key k;
    ASSERT_EQ(load_key_file(path, &k), DP_OK);
    for (size_t i = 0; i < kKeyBytes; ++i) EXPECT_EQ(k.bytes[i], i);
    unlink(path.c_str());
}

TEST(KeyFile, Refusals) {
    const std::string good =
        "deputy-psk-v1 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n";
    Key k;
    const std::string path = temp_file("bad");
    write_file(path, good, 0644);
    EXPECT_EQ(load_key_file(path, &k), DP_ERR_DENIED);  // readable by others
    write_file(path, good, 0640);
    EXPECT_EQ(load_key_file(path, &k), DP_ERR_DENIED);  // readable by the group
    write_file(path, "deputy-psk-v1 0001\n", 0600);
    EXPECT_EQ(load_key_file(path, &k), DP_ERR_INVALID);  // too short
    write_file(path, "deputy-psk-v2 " + good.substr(14), 0600);
    EXPECT_EQ(load_key_file(path, &k), DP_ERR_INVALID);  // unknown version
    write_file(path, good + good, 0600);
    EXPECT_EQ(load_key_file(path, &k), DP_ERR_INVALID);  // two keys
    write_file(path, "# nothing\n", 0600);
    EXPECT_EQ(load_key_file(path, &k), DP_ERR_INVALID);
    std::string bad_hex = good;
    bad_hex[20] = 'g';
    write_file(path, bad_hex, 0600);
    EXPECT_EQ(load_key_file(path, &k), DP_ERR_INVALID);
    unlink(path.c_str());
    EXPECT_EQ(load_key_file(path, &k), DP_ERR_IO);  // missing
}

TEST(KeyFile, SodiumVersionIsReported) {
    ASSERT_EQ(ensure_sodium(), DP_OK);
    EXPECT_STRNE(sodium_version(), "");
}

}  // namespace
}  // namespace deputy::channel::secure
