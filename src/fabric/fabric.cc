#include "fabric/fabric.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <sstream>

#include "common/log.h"
#include "common/units.h"

namespace deputy::fabric {
namespace {

// What every endpoint asks for: reliable datagram endpoints with the RMA
// `caps`, the mr_mode bits Registration honours, one thread per domain.
fi_info *make_hints(const std::string *provider, uint64_t caps,
                    fi_threading threading = FI_THREAD_DOMAIN) {
    fi_info *hints = fi_allocinfo();
    if (hints == nullptr) throw FabricError("fi_allocinfo failed: out of memory");
    hints->caps = caps;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->mr_mode =
        FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    hints->domain_attr->threading = threading;
    if (provider != nullptr) hints->fabric_attr->prov_name = strdup(provider->c_str());
    return hints;
}

std::string list_available_providers(uint64_t caps) {
    fi_info *hints = make_hints(nullptr, caps);
    fi_info *list = nullptr;
    int ret = fi_getinfo(kFabricApi, nullptr, nullptr, 0, hints, &list);
    fi_freeinfo(hints);
    if (ret != 0 || list == nullptr) return "none";
    std::vector<std::string> names;
    for (fi_info *i = list; i != nullptr; i = i->next) {
        std::string name = i->fabric_attr->prov_name;
        if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
    fi_freeinfo(list);
    std::string out;
    for (const auto &n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
}

// True when `info`'s source address is the IP in `route` (port ignored).
bool same_ip(const fi_info *info, const sockaddr_storage &route) {
    if (info->src_addr == nullptr) return false;
    const auto *sa = static_cast<const sockaddr *>(info->src_addr);
    if (sa->sa_family != route.ss_family) return false;
    if (sa->sa_family == AF_INET && info->src_addrlen >= sizeof(sockaddr_in)) {
        return std::memcmp(&reinterpret_cast<const sockaddr_in *>(sa)->sin_addr,
                           &reinterpret_cast<const sockaddr_in *>(&route)->sin_addr,
                           sizeof(in_addr)) == 0;
    }
    if (sa->sa_family == AF_INET6 && info->src_addrlen >= sizeof(sockaddr_in6)) {
        return std::memcmp(&reinterpret_cast<const sockaddr_in6 *>(sa)->sin6_addr,
                           &reinterpret_cast<const sockaddr_in6 *>(&route)->sin6_addr,
                           sizeof(in6_addr)) == 0;
    }
    return false;
}

// "FI_REMOTE_READ|FI_REMOTE_WRITE".
std::string access_text(uint64_t access) {
    static constexpr std::pair<uint64_t, const char *> kBits[] = {
        {FI_READ, "FI_READ"}, {FI_WRITE, "FI_WRITE"},
        {FI_REMOTE_READ, "FI_REMOTE_READ"}, {FI_REMOTE_WRITE, "FI_REMOTE_WRITE"},
    };
    std::string out;
    for (auto [bit, name] : kBits)
        if (access & bit) out += (out.empty() ? "" : "|") + std::string(name);
    return out.empty() ? "none" : out;
}

bool socket_address_format(const fi_info *info) {
    return info->addr_format == FI_SOCKADDR || info->addr_format == FI_SOCKADDR_IN ||
           info->addr_format == FI_SOCKADDR_IN6;
}

}  // namespace

std::string libfabric_version() {
    uint32_t v = fi_version();
    return std::to_string(FI_MAJOR(v)) + "." + std::to_string(FI_MINOR(v));
}

std::string fi_error_text(int ret) {
    return std::string(fi_strerror(ret < 0 ? -ret : ret)) + " (" + std::to_string(ret) + ")";
}

std::string address_host(const std::vector<uint8_t> &address, uint32_t addr_format) {
    if (addr_format != FI_SOCKADDR && addr_format != FI_SOCKADDR_IN &&
        addr_format != FI_SOCKADDR_IN6)
        return "";
    char host[INET6_ADDRSTRLEN] = {};
    sa_family_t family = 0;
    if (address.size() < sizeof(family)) return "";
    std::memcpy(&family, address.data(), sizeof(family));
    if (family == AF_INET && address.size() >= sizeof(sockaddr_in)) {
        sockaddr_in in;
        std::memcpy(&in, address.data(), sizeof(in));
        inet_ntop(AF_INET, &in.sin_addr, host, sizeof(host));
        return host;
    }
    if (family == AF_INET6 && address.size() >= sizeof(sockaddr_in6)) {
        sockaddr_in6 in6;
        std::memcpy(&in6, address.data(), sizeof(in6));
        inet_ntop(AF_INET6, &in6.sin6_addr, host, sizeof(host));
        return unmapped_ipv4(host);
    }
    return "";
}

std::string unmapped_ipv4(const std::string &host) {
    if (host.rfind("::ffff:", 0) == 0 && host.find('.') != std::string::npos)
        return host.substr(7);
    return host;
}

std::optional<sockaddr_storage> local_address_towards(const std::string &host) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_DGRAM;
    addrinfo *list = nullptr;
    if (host.empty() || getaddrinfo(host.c_str(), "9", &hints, &list) != 0) return std::nullopt;
    std::optional<sockaddr_storage> out;
    for (addrinfo *a = list; a != nullptr && !out; a = a->ai_next) {
        // A datagram socket's connect sends nothing: it only picks the route.
        const int fd = ::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0) continue;
        sockaddr_storage local{};
        socklen_t len = sizeof(local);
        if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr *>(&local), &len) == 0)
            out = local;
        ::close(fd);
    }
    freeaddrinfo(list);
    return out;
}

std::string mr_mode_text(uint64_t mode) {
    static constexpr std::pair<uint64_t, const char *> kBits[] = {
        {FI_MR_LOCAL, "FI_MR_LOCAL"},         {FI_MR_RAW, "FI_MR_RAW"},
        {FI_MR_VIRT_ADDR, "FI_MR_VIRT_ADDR"}, {FI_MR_ALLOCATED, "FI_MR_ALLOCATED"},
        {FI_MR_PROV_KEY, "FI_MR_PROV_KEY"},   {FI_MR_MMU_NOTIFY, "FI_MR_MMU_NOTIFY"},
        {FI_MR_RMA_EVENT, "FI_MR_RMA_EVENT"}, {FI_MR_ENDPOINT, "FI_MR_ENDPOINT"},
        {FI_MR_HMEM, "FI_MR_HMEM"},
    };
    std::string out;
    for (auto [bit, name] : kBits)
        if (mode & bit) {
            if (!out.empty()) out += '|';
            out += name;
        }
    return out.empty() ? "none" : out;
}

// ---------------------------------------------------------------- Catalog

Catalog Catalog::query(const std::string &provider, uint64_t caps, fi_threading threading) {
    fi_info *hints = make_hints(&provider, caps, threading);
    fi_info *list = nullptr;
    int ret = fi_getinfo(kFabricApi, nullptr, nullptr, 0, hints, &list);
    fi_freeinfo(hints);
    if (ret != 0 || list == nullptr) {
        if (list != nullptr) fi_freeinfo(list);
        throw FabricError("provider '" + provider + "' is not available: fi_getinfo returned " +
                        fi_error_text(ret) +
                        " for an RDM endpoint with RMA " +
                        ((caps & FI_READ) ? "reads and writes" : "writes") +
                        "; providers that can: " + list_available_providers(caps));
    }
    return Catalog(provider, list);
}

Catalog::~Catalog() {
    if (list_ != nullptr) fi_freeinfo(list_);
}

Catalog::Catalog(Catalog &&other) noexcept
    : requested_(std::move(other.requested_)), list_(std::exchange(other.list_, nullptr)) {}

std::string Catalog::provider_name() const { return list_->fabric_attr->prov_name; }

std::vector<std::string> Catalog::domains() const {
    std::vector<std::string> names;
    for (const fi_info *i = list_; i != nullptr; i = i->next) {
        std::string name = i->domain_attr->name ? i->domain_attr->name : "?";
        if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
    return names;
}

std::string Catalog::domain_names() const {
    std::string out;
    for (const auto &n : domains()) out += (out.empty() ? "" : ", ") + n;
    return out;
}

const fi_info *Catalog::find_domain(const std::string &name, const sockaddr_storage *route) const {
    const fi_info *first = nullptr, *family = nullptr;
    for (const fi_info *i = list_; i != nullptr; i = i->next) {
        if (!name.empty() && (i->domain_attr->name == nullptr || name != i->domain_attr->name))
            continue;
        if (route == nullptr || !socket_address_format(i)) return i;
        if (same_ip(i, *route)) return i;
        if (first == nullptr) first = i;
        const auto *sa = static_cast<const sockaddr *>(i->src_addr);
        if (family == nullptr && sa != nullptr && sa->sa_family == route->ss_family) family = i;
    }
    return family != nullptr ? family : first;
}

std::vector<const fi_info *> Catalog::pick(const std::string &spec, const sockaddr_storage *route,
                                           int rails) const {
    std::vector<const fi_info *> out;
    if (spec == "all") {
        std::vector<const fi_info *> distinct;
        std::set<std::string> seen;
        for (const fi_info *i = list_; i != nullptr; i = i->next)
            if (seen.insert(i->domain_attr->name ? i->domain_attr->name : "").second)
                distinct.push_back(find_domain(i->domain_attr->name ? i->domain_attr->name : "",
                                               route));
        for (int r = 0; r < rails; ++r) out.push_back(distinct[size_t(r) % distinct.size()]);
        return out;
    }
    std::vector<std::string> names;
    if (!spec.empty()) {
        std::stringstream in(spec);
        std::string item;
        while (std::getline(in, item, ',')) names.push_back(item);
    }
    if (names.size() > 1 && names.size() != size_t(rails))
        throw FabricError("--domain lists " + std::to_string(names.size()) +
                        " names but --rails is " + std::to_string(rails) +
                        " (give one name, one name per rail, or 'all')");
    for (int r = 0; r < rails; ++r) {
        std::string name = names.empty() ? "" : names[names.size() == 1 ? 0 : size_t(r)];
        const fi_info *info = find_domain(name, route);
        if (info == nullptr)
            throw FabricError("provider '" + provider_name() + "' has no domain '" + name +
                            "' (its domains: " + domain_names() + ")");
        out.push_back(info);
    }
    return out;
}

// ---------------------------------------------------------------- Endpoint

Endpoint::Endpoint(const fi_info *info, const std::string &role, int index, fi_wait_obj wait) {
    where_ = "provider '" + std::string(info->fabric_attr->prov_name) + "' domain '" +
             std::string(info->domain_attr->name ? info->domain_attr->name : "?") + "' " + role +
             (index >= 0 ? " rail " + std::to_string(index) : std::string());
    try {
        info_ = fi_dupinfo(info);
        if (info_ == nullptr) throw FabricError(where_ + ": fi_dupinfo failed: out of memory");
        int ret = fi_fabric(info_->fabric_attr, &fabric_, nullptr);
        if (ret) fail("fi_fabric", ret);
        ret = fi_domain(fabric_, info_, &domain_, nullptr);
        if (ret) fail("fi_domain", ret);

        fi_cq_attr cq_attr{};
        cq_attr.format = FI_CQ_FORMAT_DATA;
        cq_attr.wait_obj = wait;
        cq_attr.size = std::max<size_t>(info_->tx_attr->size + info_->rx_attr->size, 256);
        ret = fi_cq_open(domain_, &cq_attr, &cq_, nullptr);
        if (ret) fail("fi_cq_open", ret);

        fi_av_attr av_attr{};
        av_attr.type = info_->domain_attr->av_type != FI_AV_UNSPEC ? info_->domain_attr->av_type
                                                                    : FI_AV_TABLE;
        av_attr.count = 4;
        ret = fi_av_open(domain_, &av_attr, &av_, nullptr);
        if (ret) fail("fi_av_open", ret);

        ret = fi_endpoint(domain_, info_, &ep_, nullptr);
        if (ret) fail("fi_endpoint", ret);
        ret = fi_ep_bind(ep_, &av_->fid, 0);
        if (ret) fail("fi_ep_bind(av)", ret);
        ret = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV);
        if (ret) fail("fi_ep_bind(cq)", ret);
        ret = fi_enable(ep_);
        if (ret) fail("fi_enable", ret);
    } catch (...) {
        close_all();
        throw;
    }
}

Endpoint::~Endpoint() { close_all(); }

void Endpoint::close_all() noexcept {
    auto close = [this](fid_t fid, const char *what) {
        if (fid == nullptr) return;
        int ret = fi_close(fid);
        if (ret) DP_LOG_WARN("{}: fi_close({}) failed: {}", where_, what, fi_error_text(ret));
    };
    close(ep_ ? &ep_->fid : nullptr, "endpoint");
    close(av_ ? &av_->fid : nullptr, "av");
    close(cq_ ? &cq_->fid : nullptr, "cq");
    close(domain_ ? &domain_->fid : nullptr, "domain");
    close(fabric_ ? &fabric_->fid : nullptr, "fabric");
    ep_ = nullptr;
    av_ = nullptr;
    cq_ = nullptr;
    domain_ = nullptr;
    fabric_ = nullptr;
    if (info_ != nullptr) fi_freeinfo(info_);
    info_ = nullptr;
}

void Endpoint::fail(const std::string &call, int ret) const {
    throw FabricError(where_ + ": " + call + " failed: " + fi_error_text(ret));
}

std::vector<uint8_t> Endpoint::address() const {
    size_t len = 0;
    int ret = fi_getname(&ep_->fid, nullptr, &len);
    if (ret != -FI_ETOOSMALL && ret != 0) fail("fi_getname", ret);
    std::vector<uint8_t> addr(len);
    ret = fi_getname(&ep_->fid, addr.data(), &len);
    if (ret) fail("fi_getname", ret);
    addr.resize(len);
    return addr;
}

fi_addr_t Endpoint::insert_peer(const std::vector<uint8_t> &address, const std::string &peer) {
    fi_addr_t fi_addr = FI_ADDR_UNSPEC;
    int ret = fi_av_insert(av_, address.data(), 1, &fi_addr, 0, nullptr);
    if (ret != 1)
        throw FabricError(where_ + ": fi_av_insert of " + peer + " address " +
                        address_text(address) + " failed: " +
                        (ret < 0 ? fi_error_text(ret) : "0 of 1 inserted"));
    return fi_addr;
}

std::string Endpoint::address_text(const std::vector<uint8_t> &address) const {
    char buf[256] = {};
    size_t len = sizeof(buf);
    fi_av_straddr(av_, address.data(), buf, &len);
    buf[sizeof(buf) - 1] = '\0';
    return buf;
}

// ---------------------------------------------------------------- Registration

Registration::Registration(Endpoint &endpoint, void *buf, size_t len, uint64_t access,
                           uint64_t requested_key) {
    uint64_t mode = endpoint.mr_mode();
    // fmt, not operator+ chains: GCC 12 -O3 warns (-Wrestrict) on those.
    std::string what = fmt::format("({}, {}, mr_mode {})", units::format_size(len),
                                   access_text(access),
                                   mr_mode_text(mode));
    int ret = fi_mr_reg(endpoint.domain(), buf, len, access, 0, requested_key, 0, &mr_, nullptr);
    if (ret) endpoint.fail("fi_mr_reg" + what, ret);
    if (mode & FI_MR_ENDPOINT) {
        ret = fi_mr_bind(mr_, &endpoint.ep()->fid, 0);
        if (ret == 0) ret = fi_mr_enable(mr_);
        if (ret) {
            fi_close(&mr_->fid);
            mr_ = nullptr;
            endpoint.fail("fi_mr_bind/fi_mr_enable" + what, ret);
        }
    }
    desc_ = fi_mr_desc(mr_);
    key_ = fi_mr_key(mr_);
    if (key_ == FI_KEY_NOTAVAIL) {
        fi_close(&mr_->fid);
        mr_ = nullptr;
        throw FabricError(endpoint.where() + ": fi_mr_key returned FI_KEY_NOTAVAIL (raw keys, FI_MR_RAW, "
                        "are not supported)");
    }
    remote_base_ = (mode & FI_MR_VIRT_ADDR) ? reinterpret_cast<uint64_t>(buf) : 0;
}

Registration::~Registration() {
    if (mr_ != nullptr) {
        int ret = fi_close(&mr_->fid);
        if (ret) DP_LOG_WARN("fi_close(mr) failed: {}", fi_error_text(ret));
    }
}

}  // namespace deputy::fabric
