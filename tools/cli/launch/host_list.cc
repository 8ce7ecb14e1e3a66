#include "cli/launch/host_list.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>

namespace deputy::launch {
namespace {

// "node1:4" (Hydra's slots) -> "node1"; an IPv6 address has more than one
// colon and stays whole.
std::string without_slots(const std::string &entry) {
    const size_t colon = entry.find(':');
    if (colon == std::string::npos || entry.find(':', colon + 1) != std::string::npos)
        return entry;
    const std::string tail = entry.substr(colon + 1);
    const bool digits = !tail.empty() && std::all_of(tail.begin(), tail.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c));
    });
    return digits ? entry.substr(0, colon) : entry;
}

void add(const std::string &name, bool dedupe, std::vector<std::string> *names) {
    if (name.empty()) return;
    if (dedupe && std::find(names->begin(), names->end(), name) != names->end()) return;
    names->push_back(name);
}

std::string lower(std::string s) {
    for (char &c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

std::string first_label(const std::string &name) { return name.substr(0, name.find('.')); }

bool is_loopback(const std::string &address) {
    return address.rfind("127.", 0) == 0 || address == "::1";
}

std::string address_text(const sockaddr *sa) {
    char buf[INET6_ADDRSTRLEN] = {};
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in *>(sa)->sin_addr, buf, sizeof buf);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6 *>(sa)->sin6_addr, buf,
                  sizeof buf);
    return buf;
}

std::vector<std::string> resolve(const std::string &name) {
    std::vector<std::string> out;
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *res = nullptr;
    if (getaddrinfo(name.c_str(), nullptr, &hints, &res) != 0) return out;
    for (addrinfo *a = res; a; a = a->ai_next) out.push_back(address_text(a->ai_addr));
    freeaddrinfo(res);
    return out;
}

std::vector<std::string> local_addresses() {
    std::vector<std::string> out;
    ifaddrs *list = nullptr;
    if (getifaddrs(&list) != 0) return out;
    for (ifaddrs *i = list; i; i = i->ifa_next)
        if (i->ifa_addr && (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6))
            out.push_back(address_text(i->ifa_addr));
    freeifaddrs(list);
    return out;
}

std::string joined(const std::vector<std::string> &v) {
    std::string s;
    for (const std::string &e : v) s += (s.empty() ? "" : ", ") + e;
    return s;
}

}  // namespace

std::string comma_text(const std::vector<std::string> &names) {
    std::string s;
    for (const std::string &n : names) s += (s.empty() ? "" : ",") + n;
    return s;
}

std::vector<std::string> comma_names(const std::string &text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    std::string e;
    while (std::getline(in, e, ',')) out.push_back(e);
    return out;
}

bool read_hostfile(const std::string &path, bool dedupe, std::vector<std::string> *names,
                   std::string *error) {
    std::ifstream in(path);
    if (!in) {
        *error = "cannot read the hostfile " + path + ": " + std::strerror(errno);
        return false;
    }
    std::string line;
    while (std::getline(in, line)) {
        line = line.substr(0, line.find('#'));
        std::istringstream words(line);
        std::string first;
        if (words >> first) add(without_slots(first), dedupe, names);
    }
    return true;
}

bool read_host_names(const std::vector<std::string> &host_options,
                     std::vector<std::string> *names, std::string *error) {
    names->clear();
    for (size_t i = 0; i + 1 < host_options.size(); i += 2) {
        if (host_options[i] == "--hostfile") {
            if (!read_hostfile(host_options[i + 1], true, names, error)) return false;
            continue;
        }
        for (const std::string &entry : comma_names(host_options[i + 1]))
            add(without_slots(entry), true, names);
    }
    return true;
}

int match_local_host(const std::vector<std::string> &names, const std::string &hostname,
                     const std::vector<std::string> &local_addresses,
                     const std::function<std::vector<std::string>(const std::string &)> &resolve) {
    const std::string self = lower(hostname);
    for (size_t i = 0; i < names.size(); ++i) {
        const std::string n = lower(names[i]);
        if (!self.empty() && (n == self || n == first_label(self) || first_label(n) == self))
            return int(i);
    }
    int loopback = -1;
    for (size_t i = 0; i < names.size(); ++i) {
        for (const std::string &a : resolve(names[i])) {
            if (std::find(local_addresses.begin(), local_addresses.end(), a) ==
                local_addresses.end())
                continue;
            if (!is_loopback(a)) return int(i);
            if (loopback < 0) loopback = int(i);
        }
    }
    return loopback;
}

int find_local_host(const std::vector<std::string> &names, std::string *error) {
    char buf[256] = {};
    gethostname(buf, sizeof buf - 1);
    const std::vector<std::string> mine = local_addresses();
    const int i = match_local_host(names, buf, mine, resolve);
    if (i < 0)
        *error = std::string("this host (") + buf + ", addresses " + joined(mine) +
                 ") is none of the hosts " + joined(names);
    return i;
}

}  // namespace deputy::launch
