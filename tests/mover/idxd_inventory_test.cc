// The DSA inventory and its verdicts (src/mover/idxd/inventory.h): judge()
// and choose_queue() on inventories built here, each missing piece named
// with its fix; and read_inventory() with the real libaccel-config against
// fake idxd sysfs trees, mounted in a child's own mount namespace (the
// machine's /sys is never touched, and the mounts die with the child).
#include "mover/idxd/inventory.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace deputy::test {
namespace {

using mover::idxd::choose_queue;
using mover::idxd::DeviceInfo;
using mover::idxd::Inventory;
using mover::idxd::judge;
using mover::idxd::judge_device;
using mover::idxd::QueueInfo;
using mover::idxd::read_inventory;
using mover::idxd::Verdict;

bool has(const std::string &text, const std::string &part) {
    return text.find(part) != std::string::npos;
}

// A directory of its own under /tmp, readable by every user (the child that
// drops to uid 65534 must reach the files in it), removed at the end.
class TempDir {
  public:
    TempDir() {
        char tmpl[] = "/tmp/deputy-idxd-XXXXXX";
        const char *d = mkdtemp(tmpl);
        EXPECT_NE(d, nullptr) << std::strerror(errno);
        if (d != nullptr) path_ = d;
        chmod(path_.c_str(), 0755);
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    const std::string &path() const { return path_; }
    // A file that opens read-write (for root, who runs these tests here).
    std::string file(const std::string &name, mode_t mode = 0666) const {
        const std::string p = path_ + "/" + name;
        std::ofstream(p).put('\n');
        chmod(p.c_str(), mode);
        return p;
    }

  private:
    std::string path_;
};

QueueInfo queue(const std::string &name, const std::string &device_path, bool enabled = true,
                dp_wq_mode_t mode = DP_WQ_DEDICATED, const std::string &type = "user") {
    QueueInfo q;
    q.device = "dsa0";
    q.name = name;
    q.device_path = device_path;
    q.enabled = enabled;
    q.type = type;
    q.mode = mode;
    q.size = 16;
    q.priority = 10;
    q.threshold = mode == DP_WQ_SHARED ? 15 : 0;
    q.max_batch_size = 32;
    q.max_transfer_size = 2u << 20;
    q.block_on_fault = true;
    q.group = 0;
    return q;
}

DeviceInfo device(const std::string &name = "dsa0", bool enabled = true, bool sva = true) {
    DeviceInfo d;
    d.name = name;
    d.enabled = enabled;
    d.sva = sva;
    d.numa_node = 0;
    d.max_batch_size = 1024;
    d.max_transfer_size = 2ull << 30;
    return d;
}

TEST(IdxdJudge, DedicatedAndSharedUserQueuesThatOpenAreUsable) {
    TempDir dir;
    const DeviceInfo dev = device();
    const Verdict dv = judge_device(dev);
    EXPECT_TRUE(dv.usable);
    EXPECT_EQ(dv.found, "enabled; SVA (PASID) on; max_batch_size 1024, max_transfer_size 2147483648");
    EXPECT_EQ(dv.fix, "");

    const std::string path0 = dir.file("wq0.0");
    Verdict v = judge(dev, queue("wq0.0", path0));
    EXPECT_TRUE(v.usable) << v.found;
    EXPECT_EQ(v.found, "dedicated queue, size 16, priority 10, threshold 0, max_batch_size 32, "
                       "block_on_fault 1, type user; enabled, " + path0 + " opens");
    EXPECT_EQ(v.fix, "");

    const std::string path1 = dir.file("wq0.1");
    v = judge(dev, queue("wq0.1", path1, true, DP_WQ_SHARED));
    EXPECT_TRUE(v.usable) << v.found;
    EXPECT_TRUE(v.found.rfind("shared queue, size 16, priority 10, threshold 15,", 0) == 0)
        << v.found;
}

TEST(IdxdJudge, ADeviceWithoutSvaNeedsTheIommusScalableMode) {
    TempDir dir;
    // Checked first: a device without SVA is also disabled here, and SVA is
    // the fix that needs a reboot.
    const DeviceInfo dev = device("dsa2", false, false);
    const Verdict dv = judge_device(dev);
    EXPECT_FALSE(dv.usable);
    EXPECT_TRUE(has(dv.found, "SVA (PASID) off")) << dv.found;
    EXPECT_EQ(dv.fix, "boot with intel_iommu=on,sm_on (the IOMMU's scalable mode)");
    const Verdict v = judge(dev, queue("wq2.0", dir.file("wq2.0")));
    EXPECT_FALSE(v.usable);
    EXPECT_TRUE(has(v.found, "its device dsa2 is disabled; SVA (PASID) off")) << v.found;
    EXPECT_EQ(v.fix, dv.fix);
}

TEST(IdxdJudge, ADisabledDeviceIsEnabledWithAccelConfig) {
    TempDir dir;
    const DeviceInfo dev = device("dsa1", false, true);
    const Verdict dv = judge_device(dev);
    EXPECT_FALSE(dv.usable);
    EXPECT_TRUE(dv.found.rfind("disabled; SVA (PASID) on", 0) == 0) << dv.found;
    EXPECT_EQ(dv.fix, "accel-config load-config -c CONFIG.json -e (or accel-config enable-device "
                      "dsa1)");
    const Verdict v = judge(dev, queue("wq1.0", dir.file("wq1.0")));
    EXPECT_FALSE(v.usable);
    EXPECT_EQ(v.fix, dv.fix);
}

TEST(IdxdJudge, ADisabledQueueIsConfiguredAndEnabled) {
    TempDir dir;
    const Verdict v = judge(device(), queue("wq0.2", dir.file("wq0.2"), false));
    EXPECT_FALSE(v.usable);
    EXPECT_TRUE(has(v.found, "type user; disabled")) << v.found;
    EXPECT_EQ(v.fix, "accel-config config-wq dsa0/wq0.2 --mode=dedicated --type=user "
                     "--name=deputy --size=16 --priority=10 && accel-config enable-wq dsa0/wq0.2");
}

TEST(IdxdJudge, AKernelQueueIsReconfiguredAsAUserQueue) {
    TempDir dir;
    const Verdict v =
        judge(device(), queue("wq0.4", dir.file("wq0.4"), true, DP_WQ_DEDICATED, "kernel"));
    EXPECT_FALSE(v.usable);
    EXPECT_TRUE(has(v.found, "enabled, but a kernel queue")) << v.found;
    EXPECT_EQ(v.fix, "accel-config disable-wq dsa0/wq0.4 && accel-config config-wq dsa0/wq0.4 "
                     "--type=user --name=deputy && accel-config enable-wq dsa0/wq0.4");
}

TEST(IdxdJudge, AMissingOrDirectoryDeviceFileIsNotUsable) {
    TempDir dir;
    const std::string missing = dir.path() + "/wq0.5";
    Verdict v = judge(device(), queue("wq0.5", missing));
    EXPECT_FALSE(v.usable);
    EXPECT_TRUE(has(v.found, "enabled, but " + missing + " is missing (No such file or directory)"))
        << v.found;
    EXPECT_TRUE(has(v.fix, "ls -l /dev/dsa")) << v.fix;

    const std::string subdir = dir.path() + "/wq0.6";
    ASSERT_EQ(mkdir(subdir.c_str(), 0777), 0);
    v = judge(device(), queue("wq0.6", subdir));
    EXPECT_FALSE(v.usable);
    EXPECT_TRUE(has(v.found, subdir + " does not open: Is a directory")) << v.found;
    EXPECT_TRUE(has(v.fix, "character device")) << v.fix;
}

// The device file's mode bits say nothing to root; a user the file does not
// admit gets EACCES from open(), and the chown fix.
TEST(IdxdJudge, ADeviceFileThisUserCannotOpenNamesChown) {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to make a file another uid cannot open";
    TempDir dir;
    const std::string path = dir.file("wq0.3", 0600);  // root's, as the driver makes it
    int pipefd[2];
    ASSERT_EQ(pipe2(pipefd, O_CLOEXEC), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        close(pipefd[0]);
        if (setgid(65534) != 0 || setuid(65534) != 0) _exit(10);
        const Verdict v = judge(device(), queue("wq0.3", path));
        const std::string out = std::string(v.usable ? "1" : "0") + "\n" + v.found + "\n" + v.fix;
        _exit(write(pipefd[1], out.data(), out.size()) == ssize_t(out.size()) ? 0 : 11);
    }
    close(pipefd[1]);
    std::string out;
    char buf[1024];
    for (ssize_t n; (n = read(pipefd[0], buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
    close(pipefd[0]);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
    std::istringstream in(out);
    std::string usable, found, fix;
    std::getline(in, usable);
    std::getline(in, found);
    std::getline(in, fix);
    EXPECT_EQ(usable, "0");
    EXPECT_TRUE(has(found, path + " does not open: Permission denied")) << found;
    EXPECT_EQ(fix, "sudo chown $USER " + path + " (or a udev rule giving a group access)");
    // Root opens the same file: the verdict is the opener's.
    EXPECT_TRUE(judge(device(), queue("wq0.3", path)).usable);
}

// Two devices: dsa0 with a disabled queue, a kernel queue and a usable
// dedicated and shared queue; dsa2 without SVA.
struct Machine {
    TempDir dir;
    Inventory inv;
    Machine() {
        DeviceInfo d0 = device("dsa0");
        d0.queues.push_back(queue("wq0.0", dir.path() + "/absent", false));
        d0.queues.push_back(queue("wq0.1", dir.file("wq0.1"), true, DP_WQ_DEDICATED, "kernel"));
        d0.queues.push_back(queue("wq0.2", dir.file("wq0.2")));
        d0.queues.push_back(queue("wq0.3", dir.file("wq0.3"), true, DP_WQ_SHARED));
        DeviceInfo d2 = device("dsa2", true, false);
        QueueInfo q = queue("wq2.0", dir.file("wq2.0"));
        q.device = "dsa2";
        d2.queues.push_back(q);
        inv.devices = {d0, d2};
    }
};

TEST(IdxdChooseQueue, NoDeviceNamesTheDriverAndTheIommu) {
    Inventory inv;
    inv.missing = "the idxd driver is not loaded (/sys/bus/dsa absent)";
    QueueInfo q;
    std::string why;
    EXPECT_EQ(choose_queue(inv, "", &q, &why), DP_ERR_UNSUPPORTED);
    EXPECT_TRUE(has(why, "no DSA device: the idxd driver is not loaded")) << why;
    // The fix: on x86-64 the boot option and the driver; a build without
    // libaccel-config (aarch64) names where DSA is instead.
    const char *fix = DEPUTY_HAVE_ACCEL_CONFIG ? "modprobe idxd" : "Fix: run on an x86-64 host";
    if (DEPUTY_HAVE_ACCEL_CONFIG) {
        EXPECT_TRUE(has(why, "Sapphire Rapids")) << why;
        EXPECT_TRUE(has(why, "intel_iommu=on,sm_on")) << why;
    }
    EXPECT_TRUE(has(why, fix)) << why;
    // A named device on a machine with none says the same.
    why.clear();
    EXPECT_EQ(choose_queue(inv, "dsa0/wq0.0", &q, &why), DP_ERR_UNSUPPORTED);
    EXPECT_TRUE(has(why, fix)) << why;
}

TEST(IdxdChooseQueue, RequestFormsPickTheFirstUsableQueue) {
    Machine m;
    QueueInfo q;
    std::string why;
    ASSERT_EQ(choose_queue(m.inv, "", &q, &why), DP_OK) << why;
    EXPECT_EQ(q.device + "/" + q.name, "dsa0/wq0.2");  // wq0.0 disabled, wq0.1 a kernel queue
    EXPECT_EQ(q.device_path, m.dir.path() + "/wq0.2");
    ASSERT_EQ(choose_queue(m.inv, "dsa0", &q, &why), DP_OK) << why;
    EXPECT_EQ(q.name, "wq0.2");
    ASSERT_EQ(choose_queue(m.inv, "dsa0/wq0.3", &q, &why), DP_OK) << why;
    EXPECT_EQ(q.name, "wq0.3");
    EXPECT_EQ(q.mode, DP_WQ_SHARED);
    EXPECT_EQ(q.threshold, 15u);
}

TEST(IdxdChooseQueue, ANamedQueueThatIsNotUsableSaysWhyAndTheFix) {
    Machine m;
    QueueInfo q;
    std::string why;
    EXPECT_EQ(choose_queue(m.inv, "dsa0/wq0.0", &q, &why), DP_ERR_UNSUPPORTED);
    EXPECT_TRUE(has(why, "dsa0/wq0.0: dedicated queue")) << why;
    EXPECT_TRUE(has(why, "Fix: accel-config config-wq dsa0/wq0.0")) << why;
    EXPECT_EQ(choose_queue(m.inv, "dsa0/wq0.1", &q, &why), DP_ERR_UNSUPPORTED);
    EXPECT_TRUE(has(why, "a kernel queue")) << why;
    EXPECT_EQ(choose_queue(m.inv, "dsa2", &q, &why), DP_ERR_UNSUPPORTED);
    EXPECT_TRUE(has(why, "no usable queue on dsa2")) << why;
    EXPECT_TRUE(has(why, "intel_iommu=on,sm_on")) << why;
    EXPECT_EQ(choose_queue(m.inv, "dsa2/wq2.0", &q, &why), DP_ERR_UNSUPPORTED);
    EXPECT_TRUE(has(why, "SVA (PASID) off")) << why;
}

TEST(IdxdChooseQueue, NoUsableQueueAnywhereListsEachWithItsFix) {
    Machine m;
    m.inv.devices[0].queues.resize(2);  // only the disabled and the kernel queue
    QueueInfo q;
    std::string why;
    EXPECT_EQ(choose_queue(m.inv, "", &q, &why), DP_ERR_UNSUPPORTED);
    EXPECT_TRUE(why.rfind("no usable DSA queue: ", 0) == 0) << why;
    EXPECT_TRUE(has(why, "dsa0/wq0.0: ")) << why;
    EXPECT_TRUE(has(why, "accel-config enable-wq dsa0/wq0.0")) << why;
    EXPECT_TRUE(has(why, "dsa0/wq0.1: ")) << why;
    EXPECT_TRUE(has(why, "accel-config disable-wq dsa0/wq0.1")) << why;
    EXPECT_TRUE(has(why, "dsa2: ")) << why;
    EXPECT_TRUE(has(why, "sm_on")) << why;
    // An enabled device with no queue at all: configure one.
    m.inv.devices[0].queues.clear();
    EXPECT_EQ(choose_queue(m.inv, "dsa0", &q, &why), DP_ERR_UNSUPPORTED);
    EXPECT_TRUE(has(why, "dsa0: enabled, but has no work queue")) << why;
    EXPECT_TRUE(has(why, "accel-config config-wq dsa0/wq0.0")) << why;
}

TEST(IdxdChooseQueue, UnknownNamesListTheOnesThatExist) {
    Machine m;
    QueueInfo q;
    std::string why;
    EXPECT_EQ(choose_queue(m.inv, "dsa7", &q, &why), DP_ERR_UNSUPPORTED);
    EXPECT_EQ(why, "no DSA device dsa7 here; the DSA devices are dsa0, dsa2");
    EXPECT_EQ(choose_queue(m.inv, "dsa7/wq7.0", &q, &why), DP_ERR_UNSUPPORTED);
    EXPECT_EQ(why, "no DSA device dsa7 here; the DSA devices are dsa0, dsa2");
    EXPECT_EQ(choose_queue(m.inv, "dsa0/wq0.9", &q, &why), DP_ERR_UNSUPPORTED);
    EXPECT_EQ(why, "no queue wq0.9 on dsa0; its queues are dsa0/wq0.0, dsa0/wq0.1, dsa0/wq0.2, "
                   "dsa0/wq0.3");
}

TEST(IdxdChooseQueue, ARequestOfAnotherFormIsInvalid) {
    Machine m;
    for (const char *bad : {"wq0.0", "dsa", "dsa0/", "dsa0/wq0", "dsa0/wq.1", "iax1", "dsa0/wq0.0/x",
                            "/dev/dsa/wq0.0", "dsa0 ", "DSA0"}) {
        QueueInfo q;
        std::string why;
        EXPECT_EQ(choose_queue(m.inv, bad, &q, &why), DP_ERR_INVALID) << bad;
        EXPECT_TRUE(has(why, std::string("'") + bad + "' is not of the form DEVICE or DEVICE/QUEUE"))
            << why;
    }
}

// ---- read_inventory() against fake idxd sysfs trees -------------------------

void write_file(const std::string &path, const std::string &text) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path) << text << "\n";
}

// What the idxd driver shows of a device, as libaccel-config reads it. It
// scans /sys/bus/dsa/devices for dsa* and iax* entries, and each device's
// own directory for its wq*, group* and engine* entries; it refuses a
// device whose cmd_status it cannot write (3.5.3 resets it on every read).
void fake_device(const std::string &name, const std::string &state, const char *pasid) {
    const std::string d = "/sys/bus/dsa/devices/" + name;
    write_file(d + "/state", state);
    write_file(d + "/cmd_status", "0");
    if (pasid != nullptr) write_file(d + "/pasid_enabled", pasid);
    write_file(d + "/numa_node", "1");
    write_file(d + "/max_batch_size", "1024");
    write_file(d + "/max_transfer_size", "2147483648");
    write_file(d + "/max_engines", "4");
    write_file(d + "/max_groups", "4");
    write_file(d + "/max_work_queues", "8");
    write_file(d + "/max_work_queues_size", "128");
    write_file(d + "/configurable", "1");
    write_file(d + "/version", "0x100");
}

struct FakeQueue {
    std::string name, state, mode, type;
    int size, threshold;
};

void fake_queue(const std::string &device, const FakeQueue &q) {
    const std::string d = "/sys/bus/dsa/devices/" + device + "/" + q.name;
    write_file(d + "/state", q.state);
    write_file(d + "/mode", q.mode);
    write_file(d + "/type", q.type);
    write_file(d + "/name", q.type == "user" ? "deputy" : "");
    write_file(d + "/size", std::to_string(q.size));
    write_file(d + "/priority", "10");
    write_file(d + "/threshold", std::to_string(q.threshold));
    write_file(d + "/block_on_fault", "1");
    write_file(d + "/max_batch_size", "32");
    write_file(d + "/max_transfer_size", "2097152");
    write_file(d + "/group_id", "0");
    write_file(d + "/cdev_minor", "0");
    // The character device the driver makes for an enabled user queue; a
    // plain file opens the same way.
    if (q.state == "enabled" && q.type == "user") write_file("/dev/dsa/" + q.name, "");
}

// What a child saw: the inventory, each queue's verdict, and the fds it
// had before and after reading.
struct Seen {
    std::string skipped;  // why the child could not build the tree
    Inventory inv;
    std::map<std::string, Verdict> verdicts;  // "dsa0/wq0.0"
    std::map<std::string, Verdict> devices;
    int fds_before = -1, fds_after = -1;
    std::string printed;  // what the child wrote to stderr meanwhile
};

int open_fds() {
    int n = 0;
    for ([[maybe_unused]] const auto &e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
    return n;
}

// Line records through the pipe, fields split by tabs (no finding holds one).
std::string serialize(const Inventory &inv, int before, int after) {
    std::ostringstream o;
    o << "fds\t" << before << "\t" << after << "\n";
    o << "missing\t" << inv.missing << "\n";
    for (const DeviceInfo &d : inv.devices) {
        o << "device\t" << d.name << "\t" << d.enabled << "\t" << d.sva << "\t" << d.numa_node
          << "\t" << d.max_batch_size << "\t" << d.max_transfer_size << "\t" << d.max_engines
          << "\t" << d.max_groups << "\t" << d.max_work_queues << "\n";
        const Verdict dv = judge_device(d);
        o << "dverdict\t" << d.name << "\t" << dv.usable << "\t" << dv.found << "\t" << dv.fix
          << "\n";
        for (const QueueInfo &q : d.queues) {
            o << "queue\t" << q.device << "\t" << q.name << "\t" << q.device_path << "\t"
              << q.enabled << "\t" << q.type << "\t" << int(q.mode) << "\t" << q.size << "\t"
              << q.priority << "\t" << q.threshold << "\t" << q.max_batch_size << "\t"
              << q.max_transfer_size << "\t" << q.block_on_fault << "\t" << q.group << "\n";
            const Verdict v = judge(d, q);
            o << "verdict\t" << d.name << "/" << q.name << "\t" << v.usable << "\t" << v.found
              << "\t" << v.fix << "\n";
        }
    }
    return o.str();
}

std::vector<std::string> split(const std::string &line) {
    std::vector<std::string> f;
    size_t start = 0;
    for (size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1)
        f.push_back(line.substr(start, tab - start));
    f.push_back(line.substr(start));
    return f;
}

Seen parse(const std::string &text) {
    Seen s;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        const std::vector<std::string> f = split(line);
        if (f[0] == "skip") {
            s.skipped = f[1];
        } else if (f[0] == "stderr") {
            s.printed = f[1];
        } else if (f[0] == "fds") {
            s.fds_before = std::stoi(f[1]);
            s.fds_after = std::stoi(f[2]);
        } else if (f[0] == "missing") {
            s.inv.missing = f[1];
        } else if (f[0] == "device") {
            DeviceInfo d;
            d.name = f[1];
            d.enabled = f[2] == "1";
            d.sva = f[3] == "1";
            d.numa_node = std::stoi(f[4]);
            d.max_batch_size = uint32_t(std::stoul(f[5]));
            d.max_transfer_size = std::stoull(f[6]);
            d.max_engines = uint32_t(std::stoul(f[7]));
            d.max_groups = uint32_t(std::stoul(f[8]));
            d.max_work_queues = uint32_t(std::stoul(f[9]));
            s.inv.devices.push_back(d);
        } else if (f[0] == "queue") {
            QueueInfo q;
            q.device = f[1];
            q.name = f[2];
            q.device_path = f[3];
            q.enabled = f[4] == "1";
            q.type = f[5];
            q.mode = dp_wq_mode_t(std::stoi(f[6]));
            q.size = uint32_t(std::stoul(f[7]));
            q.priority = uint32_t(std::stoul(f[8]));
            q.threshold = uint32_t(std::stoul(f[9]));
            q.max_batch_size = uint32_t(std::stoul(f[10]));
            q.max_transfer_size = std::stoull(f[11]);
            q.block_on_fault = f[12] == "1";
            q.group = std::stoi(f[13]);
            s.inv.devices.back().queues.push_back(q);
        } else if (f[0] == "verdict" || f[0] == "dverdict") {
            Verdict v;
            v.usable = f[2] == "1";
            v.found = f[3];
            v.fix = f[4];
            (f[0] == "verdict" ? s.verdicts : s.devices)[f[1]] = v;
        }
    }
    return s;
}

bool tmpfs_on(const char *target) {
    std::ifstream in("/proc/self/mountinfo");
    for (std::string line; std::getline(in, line);)
        if (has(line, std::string(" ") + target + " ") && has(line, " - tmpfs ")) return true;
    return false;
}

// Runs read_inventory() in a child whose mount namespace shows `build`'s
// tree at /sys/bus (and a tmpfs /dev for the device files); the namespace
// and its mounts end with the child.
Seen read_in_fake_sysfs(const std::function<void()> &build) {
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        ADD_FAILURE() << "pipe2: " << std::strerror(errno);
        return {};
    }
    const pid_t child = fork();
    if (child < 0) {
        ADD_FAILURE() << "fork: " << std::strerror(errno);
        close(pipefd[0]);
        close(pipefd[1]);
        return {};
    }
    if (child == 0) {
        close(pipefd[0]);
        alarm(60);  // a stuck child must not hang the suite
        auto send = [&](const std::string &text) {
            const bool ok = write(pipefd[1], text.data(), text.size()) == ssize_t(text.size());
            _exit(ok ? 0 : 12);
        };
        auto skip = [&](const char *what) {
            send(std::string("skip\t") + what + ": " + std::strerror(errno) +
                 (geteuid() != 0 ? " (not root)" : "") + "\n");
        };
        if (unshare(CLONE_NEWNS) != 0) skip("unshare(CLONE_NEWNS)");
        // Private first: our mounts must not propagate to the machine's
        // namespace through a shared /.
        if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
            skip("making / private");
        if (mount("deputy-fake-sys", "/sys/bus", "tmpfs", MS_NOSUID, "mode=0755") != 0)
            skip("mounting a tmpfs on /sys/bus");
        if (mount("deputy-fake-dev", "/dev", "tmpfs", MS_NOSUID, "mode=0755") != 0)
            skip("mounting a tmpfs on /dev");
        build();
        // What the reader prints (libaccel-config prints its errors to
        // stderr unless told otherwise) goes to a memfd, sent back below.
        const int err = memfd_create("stderr", MFD_CLOEXEC);
        if (err < 0 || dup2(err, STDERR_FILENO) < 0) skip("redirecting stderr");
        // The count after covers judge() too, which opens each device file.
        const int before = open_fds();
        const Inventory inv = read_inventory();
        serialize(inv, 0, 0);
        const int after = open_fds();
        std::string printed(4096, '\0');
        const ssize_t n = pread(err, printed.data(), printed.size(), 0);
        printed.resize(n > 0 ? size_t(n) : 0);
        for (char &c : printed)
            if (c == '\n' || c == '\t') c = ' ';
        send(serialize(inv, before, after) + "stderr\t" + printed + "\n");
    }
    close(pipefd[1]);
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = read(pipefd[0], buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
    close(pipefd[0]);
    int status = 0;
    EXPECT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "child status " << status << ", output:\n" << out;
    const Seen seen = parse(out);
    EXPECT_EQ(seen.printed, "") << "read_inventory() printed";
    // Nothing of the child's mounts is left in ours.
    EXPECT_FALSE(tmpfs_on("/sys/bus"));
    EXPECT_FALSE(tmpfs_on("/dev"));
    return seen;
}

#define SKIP_IF_NO_NAMESPACE(seen) \
    if (!(seen).skipped.empty()) GTEST_SKIP() << "cannot fake /sys here: " << (seen).skipped

// The reader is libaccel-config's: a build without it (aarch64) reads
// nothing, and says why (the test after the fixture's).
class IdxdReadInventory : public ::testing::Test {
  protected:
    void SetUp() override {
        fds_ = open_fds();
        if (!DEPUTY_HAVE_ACCEL_CONFIG) GTEST_SKIP() << "this build has no libaccel-config";
    }
    void TearDown() override { EXPECT_EQ(open_fds(), fds_) << "an fd leaked"; }
    int fds_ = 0;
};

TEST(IdxdReadInventoryWithoutLibaccelConfig, IsEmptyAndSaysWhyAndWhereDsaIs) {
    if (DEPUTY_HAVE_ACCEL_CONFIG) GTEST_SKIP() << "this build reads through libaccel-config";
    const Inventory inv = read_inventory();
    EXPECT_TRUE(inv.devices.empty());
    EXPECT_EQ(inv.missing,
              "this build has no libaccel-config (Intel DSA is an x86-64 device; Debian builds "
              "libaccel-config for amd64 only)");
    QueueInfo q;
    std::string why;
    EXPECT_EQ(choose_queue(inv, "", &q, &why), DP_ERR_UNSUPPORTED);
    EXPECT_TRUE(has(why, "no libaccel-config")) << why;
    EXPECT_TRUE(has(why, "Fix: run on an x86-64 host")) << why;
    EXPECT_FALSE(has(why, "intel_iommu")) << why;  // no boot option makes DSA appear here
}

TEST_F(IdxdReadInventory, NoDsaBusSaysTheDriverIsNotLoaded) {
    const Seen s = read_in_fake_sysfs([] {});
    SKIP_IF_NO_NAMESPACE(s);
    EXPECT_TRUE(s.inv.devices.empty());
    EXPECT_TRUE(has(s.inv.missing, "idxd driver")) << s.inv.missing;
    EXPECT_TRUE(has(s.inv.missing, "(/sys/bus/dsa absent)")) << s.inv.missing;
}

TEST_F(IdxdReadInventory, ABusWithoutDevicesSaysSo) {
    const Seen s = read_in_fake_sysfs([] {
        std::filesystem::create_directories("/sys/bus/dsa/devices");
        std::filesystem::create_directories("/sys/bus/dsa/drivers/idxd");
    });
    SKIP_IF_NO_NAMESPACE(s);
    EXPECT_TRUE(s.inv.devices.empty());
    EXPECT_EQ(s.inv.missing, "the DSA bus is there but has no device");
}

TEST_F(IdxdReadInventory, ADeviceLibaccelConfigRefusesIsNamedWithItsError) {
    // An entry whose device is gone (sysfs entries are links to the
    // device's directory): libaccel-config cannot open it.
    const Seen s = read_in_fake_sysfs([] {
        std::filesystem::create_directories("/sys/bus/dsa/devices");
        std::filesystem::create_symlink("../../../devices/deputy-gone/dsa0",
                                        "/sys/bus/dsa/devices/dsa0");
    });
    SKIP_IF_NO_NAMESPACE(s);
    EXPECT_TRUE(s.inv.devices.empty());
    EXPECT_TRUE(has(s.inv.missing, "/sys/bus/dsa/devices lists dsa0, but libaccel-config read no "
                                   "device there ("))
        << s.inv.missing;
    // libaccel-config's own words, which it would have printed to stderr.
    EXPECT_TRUE(has(s.inv.missing, "No such file or directory")) << s.inv.missing;
}

TEST_F(IdxdReadInventory, ADisabledDevice) {
    const Seen s = read_in_fake_sysfs([] {
        fake_device("dsa0", "disabled", "1");
        fake_queue("dsa0", {"wq0.0", "disabled", "dedicated", "none", 0, 0});
    });
    SKIP_IF_NO_NAMESPACE(s);
    ASSERT_EQ(s.inv.devices.size(), 1u) << s.inv.missing;
    const DeviceInfo &d = s.inv.devices[0];
    EXPECT_EQ(d.name, "dsa0");
    EXPECT_FALSE(d.enabled);
    EXPECT_TRUE(d.sva);
    EXPECT_EQ(s.inv.missing, "");
    const Verdict &dv = s.devices.at("dsa0");
    EXPECT_FALSE(dv.usable);
    EXPECT_TRUE(has(dv.fix, "accel-config enable-device dsa0")) << dv.fix;
    ASSERT_EQ(d.queues.size(), 1u);
    EXPECT_FALSE(d.queues[0].enabled);
    EXPECT_EQ(d.queues[0].type, "none");
    QueueInfo q;
    std::string why;
    EXPECT_EQ(choose_queue(s.inv, "", &q, &why), DP_ERR_UNSUPPORTED);
    EXPECT_TRUE(has(why, "accel-config enable-device dsa0")) << why;
}

TEST_F(IdxdReadInventory, AnEnabledDeviceWithSvaAndItsQueues) {
    const Seen s = read_in_fake_sysfs([] {
        std::filesystem::create_directories("/sys/bus/dsa/drivers/idxd");
        fake_device("dsa0", "enabled", "1");
        fake_queue("dsa0", {"wq0.0", "enabled", "dedicated", "user", 16, 0});
        fake_queue("dsa0", {"wq0.1", "enabled", "shared", "user", 32, 15});
        fake_queue("dsa0", {"wq0.2", "disabled", "dedicated", "user", 16, 0});
        // An IAA device shares the dsa bus: not ours.
        fake_device("iax1", "enabled", "1");
        fake_queue("iax1", {"wq1.0", "enabled", "dedicated", "user", 16, 0});
    });
    SKIP_IF_NO_NAMESPACE(s);
    ASSERT_EQ(s.inv.devices.size(), 1u) << s.inv.missing;
    EXPECT_EQ(s.inv.missing, "");
    const DeviceInfo &d = s.inv.devices[0];
    EXPECT_EQ(d.name, "dsa0");
    EXPECT_TRUE(d.enabled);
    EXPECT_TRUE(d.sva);
    EXPECT_EQ(d.numa_node, 1);
    EXPECT_EQ(d.max_batch_size, 1024u);
    EXPECT_EQ(d.max_transfer_size, 2147483648ull);
    EXPECT_EQ(d.max_engines, 4u);
    EXPECT_EQ(d.max_groups, 4u);
    EXPECT_EQ(d.max_work_queues, 8u);
    EXPECT_TRUE(s.devices.at("dsa0").usable);
    ASSERT_EQ(d.queues.size(), 3u);

    const QueueInfo &w0 = d.queues[0];
    EXPECT_EQ(w0.device, "dsa0");
    EXPECT_EQ(w0.name, "wq0.0");
    EXPECT_EQ(w0.device_path, "/dev/dsa/wq0.0");
    EXPECT_TRUE(w0.enabled);
    EXPECT_EQ(w0.type, "user");
    EXPECT_EQ(w0.mode, DP_WQ_DEDICATED);
    EXPECT_EQ(w0.size, 16u);
    EXPECT_EQ(w0.priority, 10u);
    EXPECT_EQ(w0.threshold, 0u);
    EXPECT_EQ(w0.max_batch_size, 32u);
    EXPECT_EQ(w0.max_transfer_size, 2097152u);
    EXPECT_TRUE(w0.block_on_fault);
    EXPECT_EQ(w0.group, 0);
    const Verdict &v0 = s.verdicts.at("dsa0/wq0.0");
    EXPECT_TRUE(v0.usable) << v0.found;
    EXPECT_EQ(v0.found, "dedicated queue, size 16, priority 10, threshold 0, max_batch_size 32, "
                        "block_on_fault 1, type user; enabled, /dev/dsa/wq0.0 opens");

    const QueueInfo &w1 = d.queues[1];
    EXPECT_EQ(w1.name, "wq0.1");
    EXPECT_EQ(w1.mode, DP_WQ_SHARED);
    EXPECT_EQ(w1.size, 32u);
    EXPECT_EQ(w1.threshold, 15u);
    EXPECT_TRUE(s.verdicts.at("dsa0/wq0.1").usable) << s.verdicts.at("dsa0/wq0.1").found;

    const QueueInfo &w2 = d.queues[2];
    EXPECT_EQ(w2.name, "wq0.2");
    EXPECT_FALSE(w2.enabled);
    const Verdict &v2 = s.verdicts.at("dsa0/wq0.2");
    EXPECT_FALSE(v2.usable);
    EXPECT_TRUE(has(v2.fix, "accel-config enable-wq dsa0/wq0.2")) << v2.fix;
    EXPECT_EQ(s.verdicts.count("iax1/wq1.0"), 0u);

    // libaccel-config's own descriptors are all closed again.
    EXPECT_EQ(s.fds_after, s.fds_before);
}

TEST_F(IdxdReadInventory, ADeviceWithoutSva) {
    const Seen s = read_in_fake_sysfs([] {
        fake_device("dsa2", "enabled", "0");
        fake_queue("dsa2", {"wq2.0", "enabled", "dedicated", "user", 16, 0});
    });
    SKIP_IF_NO_NAMESPACE(s);
    ASSERT_EQ(s.inv.devices.size(), 1u) << s.inv.missing;
    const DeviceInfo &d = s.inv.devices[0];
    EXPECT_EQ(d.name, "dsa2");
    EXPECT_TRUE(d.enabled);
    // pasid_enabled reads "0": libaccel-config 3.5.3 would call that SVA on.
    EXPECT_FALSE(d.sva);
    const Verdict &dv = s.devices.at("dsa2");
    EXPECT_FALSE(dv.usable);
    EXPECT_TRUE(has(dv.found, "SVA (PASID) off")) << dv.found;
    EXPECT_EQ(dv.fix, "boot with intel_iommu=on,sm_on (the IOMMU's scalable mode)");
    const Verdict &v = s.verdicts.at("dsa2/wq2.0");
    EXPECT_FALSE(v.usable);
    EXPECT_EQ(v.fix, dv.fix);
}

// libaccel-config 3.5.3 dereferences what it read of a queue's type and
// mode without checking: the reader steps around both.
TEST_F(IdxdReadInventory, AQueueWithoutItsTypeAttributeDoesNotCrashTheReader) {
    const Seen s = read_in_fake_sysfs([] {
        fake_device("dsa0", "enabled", "1");
        fake_queue("dsa0", {"wq0.0", "enabled", "dedicated", "user", 16, 0});
        fake_queue("dsa0", {"wq0.1", "enabled", "dedicated", "user", 16, 0});
        std::filesystem::remove("/sys/bus/dsa/devices/dsa0/wq0.1/type");
    });
    SKIP_IF_NO_NAMESPACE(s);
    ASSERT_EQ(s.inv.devices.size(), 1u) << s.inv.missing;
    EXPECT_TRUE(s.inv.devices[0].enabled);
    EXPECT_TRUE(s.inv.devices[0].queues.empty());  // left out rather than listed by a crash
}

TEST_F(IdxdReadInventory, AQueueWithoutItsModeAttributeDoesNotCrashTheReader) {
    const Seen s = read_in_fake_sysfs([] {
        fake_device("dsa0", "enabled", "1");
        fake_queue("dsa0", {"wq0.0", "enabled", "shared", "user", 16, 8});
        std::filesystem::remove("/sys/bus/dsa/devices/dsa0/wq0.0/mode");
    });
    SKIP_IF_NO_NAMESPACE(s);
    ASSERT_EQ(s.inv.devices.size(), 1u) << s.inv.missing;
    ASSERT_EQ(s.inv.devices[0].queues.size(), 1u);
    EXPECT_EQ(s.inv.devices[0].queues[0].threshold, 8u);
}

}  // namespace
}  // namespace deputy::test
