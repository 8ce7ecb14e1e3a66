// Validation of `deputy bench rail` options: every bad value gets an error
// naming the flag and its limit.
#include <gtest/gtest.h>

#include "bench/rail/oob.h"
#include "bench/rail/options.h"
#include "bench/rail/rail_error.h"

namespace deputy::rail {
namespace {

std::string error_of(RailOptions o) {
    try {
        validate(o);
    } catch (const RailError &e) {
        return e.what();
    }
    return "";
}

TEST(RailOptions, DefaultsAreValid) {
    RailOptions o;
    EXPECT_EQ(error_of(o), "");
}

TEST(RailOptions, RailsMustDivideEvenlyOverDevices) {
    RailOptions o;
    o.rails = 3;
    o.devices = 2;
    EXPECT_EQ(error_of(o),
              "--rails 3 is not divisible by --devices 2 (each device gets the same number of rails)");
    o.rails = 4;
    EXPECT_EQ(error_of(o), "");
}

TEST(RailOptions, RangesNameTheFlag) {
    RailOptions o;
    o.rails = 0;
    EXPECT_EQ(error_of(o), "--rails 0 is out of range (1-256)");
    o = RailOptions();
    o.page_size = 0;
    EXPECT_EQ(error_of(o), "--page-size 0 is out of range (1-1073741824)");
    o = RailOptions();
    o.batch = 0;
    EXPECT_EQ(error_of(o), "--batch 0 is out of range (1-1024)");
    o = RailOptions();
    o.tx_depth = 70000;
    EXPECT_EQ(error_of(o), "--tx-depth 70000 is out of range (1-65536)");
    o = RailOptions();
    o.link_gbps = 0;
    EXPECT_EQ(error_of(o), "--link-gbps must be a positive number of Gbit/s per rail");
    o = RailOptions();
    o.end_signal = "smoke";
    EXPECT_EQ(error_of(o), "--end-signal 'smoke' is not one of auto, data, message");
    o = RailOptions();
    o.rx_poll_us = -2;
    EXPECT_EQ(error_of(o), "--rx-poll-us -2 is out of range (-1-1000000)");
}

TEST(RailOptions, EveryRailNeedsAPage) {
    RailOptions o;
    o.rails = 4;
    o.pages = 3;
    EXPECT_EQ(error_of(o),
              "--pages 3 is less than the rails per device (4): every rail needs a page to write");
    o.devices = 2;  // two rails per device: three pages are enough
    EXPECT_EQ(error_of(o), "");
}

TEST(RailOptions, BuffersMustFitInMemory) {
    RailOptions o;
    o.page_size = 1ull << 30;
    o.pages = 1ull << 20;
    std::string e = error_of(o);
    EXPECT_EQ(e.rfind("--pages x --page-size x --buffers x --devices x 2 sides = 2048T exceeds half of this machine's memory (", 0), 0u)
        << e;
}

TEST(RailOptions, PinListIsChecked) {
    RailOptions o;
    o.pin = "0,x";
    EXPECT_EQ(error_of(o), "--pin: bad CPU list element 'x' (expected N or N-M)");
    o.pin = "100000";
    EXPECT_EQ(error_of(o).rfind("--pin: CPU 100000 does not exist (this machine has 0-", 0), 0u);
    o.pin = "0";
    validate(o);
    EXPECT_EQ(o.cpus, std::vector<int>{0});
}

TEST(RailOptions, RxPollDefaultsPerProvider) {
    EXPECT_EQ(rx_poll_us_for("shm", -1), 100);
    EXPECT_EQ(rx_poll_us_for("tcp;ofi_rxm", -1), 0);
    EXPECT_EQ(rx_poll_us_for("shm", 0), 0);
    EXPECT_EQ(rx_poll_us_for("tcp;ofi_rxm", 7), 7);
}

std::string host_port_error(const std::string &text) {
    try {
        parse_host_port(text, 47611, "--connect");
    } catch (const RailError &e) {
        return e.what();
    }
    return "";
}

TEST(RailHostPort, Forms) {
    HostPort a = parse_host_port("10.0.0.1", 47611, "--connect");
    EXPECT_EQ(a.host, "10.0.0.1");
    EXPECT_EQ(a.port, 47611);
    HostPort b = parse_host_port("node7:9000", 47611, "--connect");
    EXPECT_EQ(b.host, "node7");
    EXPECT_EQ(b.port, 9000);
    HostPort c = parse_host_port("[fd00::1]:123", 47611, "--connect");
    EXPECT_EQ(c.host, "fd00::1");
    EXPECT_EQ(c.port, 123);
    EXPECT_EQ(c.text(), "[fd00::1]:123");
    HostPort d = parse_host_port("::1", 5, "--connect");
    EXPECT_EQ(d.host, "::1");
    EXPECT_EQ(d.port, 5);
}

TEST(RailHostPort, BadFormsNameTheFlag) {
    EXPECT_EQ(host_port_error(""), "--connect is empty (expected HOST or HOST:PORT)");
    EXPECT_EQ(host_port_error("host:99999"),
              "--connect 'host:99999': port '99999' is not a number in 1-65535");
    EXPECT_EQ(host_port_error("host:"), "--connect 'host:': port '' is not a number in 1-65535");
    EXPECT_EQ(host_port_error(":80"), "--connect ':80': the host is empty");
    EXPECT_EQ(host_port_error("[::1"), "--connect '[::1': missing ']'");
}

}  // namespace
}  // namespace deputy::rail
