// libfabric, once for the project: a provider's catalogue of domains, an
// endpoint with its fabric, domain, address vector and completion queue
// (a rail of `deputy bench rail`, the remote-memory link of a team proxy),
// and memory registrations that honour the provider's mr_mode. Every
// failure throws FabricError naming the provider, the endpoint and the
// libfabric call with fi_strerror's text; callers in the library turn it
// into a status.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace deputy::fabric {

class FabricError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// The API version requested from fi_getinfo (the headers built against).
inline constexpr uint32_t kFabricApi = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);

// "1.17" for the libfabric loaded at run time.
std::string libfabric_version();
// "No data available (-61)".
std::string fi_error_text(int ret);
// The IP (as inet_ntop writes it; an IPv4-mapped IPv6 one as IPv4) of an
// endpoint address in a socket address format (FI_SOCKADDR, _IN, _IN6);
// "" for other formats or an address too short for its family.
std::string address_host(const std::vector<uint8_t> &address, uint32_t addr_format);
// "10.0.0.2" for "::ffff:10.0.0.2" (an IPv4-mapped IPv6 address, as a
// dual-stack socket names an IPv4 peer); any other text as it is.
std::string unmapped_ipv4(const std::string &host);
// This host's address on the interface that routes to `host` (an IP or a
// name), for Catalog::pick's `route`: what the kernel would use as a
// source. Nothing when `host` does not resolve or has no route.
std::optional<sockaddr_storage> local_address_towards(const std::string &host);
// "FI_MR_LOCAL|FI_MR_VIRT_ADDR" ("none" for 0).
std::string mr_mode_text(uint64_t mode);

// What an endpoint does with RMA: `deputy bench rail` writes; a team
// proxy reads a remote member's sources and writes its results.
inline constexpr uint64_t kRmaWrites = FI_RMA | FI_WRITE | FI_REMOTE_WRITE;
inline constexpr uint64_t kRmaReadsAndWrites =
    FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

// The fi_getinfo answer for one provider: RDM endpoints with the RMA `caps`.
class Catalog {
public:
    // Throws FabricError "provider 'x' is not available: fi_getinfo
    // returned ..." listing the providers that are, when none matches.
    // `threading`: FI_THREAD_DOMAIN (the caller serialises every call on a
    // domain) or FI_THREAD_SAFE (any thread, any time).
    static Catalog query(const std::string &provider, uint64_t caps = kRmaWrites,
                         fi_threading threading = FI_THREAD_DOMAIN);
    ~Catalog();
    Catalog(Catalog &&other) noexcept;
    Catalog &operator=(Catalog &&) = delete;
    Catalog(const Catalog &) = delete;

    // One fi_info per rail. `domain_spec`: "" (the interface that routes to
    // `route` if given, else the first), a name, a comma list of one name per
    // rail, or "all" (rails round-robin over the provider's domains);
    // "pcie" is resolved to such a list first (pcie_groups.h).
    std::vector<const fi_info *> pick(const std::string &domain_spec,
                                      const sockaddr_storage *route, int rails) const;
    const std::string &requested() const { return requested_; }
    // Provider name as libfabric reports it ("tcp;ofi_rxm").
    std::string provider_name() const;
    // Its distinct domain names, in fi_getinfo's order.
    std::vector<std::string> domains() const;

private:
    Catalog(std::string requested, fi_info *list) : requested_(std::move(requested)), list_(list) {}
    std::string domain_names() const;
    const fi_info *find_domain(const std::string &name, const sockaddr_storage *route) const;

    std::string requested_;
    fi_info *list_ = nullptr;
};

class Endpoint {
public:
    // `role` and `index` only name it in messages ("client rail 2"; an
    // index below 0: just the role).
    // `wait`: the completion queue's wait object (FI_WAIT_NONE: polled
    // only; FI_WAIT_UNSPEC: fi_cq_sread may sleep on it).
    Endpoint(const fi_info *info, const std::string &role, int index,
             fi_wait_obj wait = FI_WAIT_NONE);
    ~Endpoint();
    Endpoint(const Endpoint &) = delete;
    Endpoint &operator=(const Endpoint &) = delete;

    std::vector<uint8_t> address() const;
    // Inserts a peer's address; returns its fi_addr_t.
    fi_addr_t insert_peer(const std::vector<uint8_t> &address, const std::string &peer);
    std::string address_text(const std::vector<uint8_t> &address) const;

    fid_ep *ep() const { return ep_; }
    fid_cq *cq() const { return cq_; }
    fid_domain *domain() const { return domain_; }
    const fi_info *info() const { return info_; }
    uint64_t mr_mode() const { return info_->domain_attr->mr_mode; }
    // Immediate data (FI_REMOTE_CQ_DATA) of at least 4 bytes is available.
    bool remote_cq_data() const { return info_->domain_attr->cq_data_size >= 4; }
    size_t tx_size() const { return info_->tx_attr->size; }
    size_t max_msg_size() const { return info_->ep_attr->max_msg_size; }
    std::string provider_name() const { return info_->fabric_attr->prov_name; }
    std::string domain_name() const { return info_->domain_attr->name; }
    // "provider 'shm' domain 'shm' client rail 1".
    const std::string &where() const { return where_; }

    // Throws "<where>: <call> failed: <fi_strerror> (<ret>)".
    [[noreturn]] void fail(const std::string &call, int ret) const;

private:
    void close_all() noexcept;

    std::string where_;
    fi_info *info_ = nullptr;
    fid_fabric *fabric_ = nullptr;
    fid_domain *domain_ = nullptr;
    fid_av *av_ = nullptr;
    fid_cq *cq_ = nullptr;
    fid_ep *ep_ = nullptr;
};

// One buffer registered in one endpoint's domain, mr_mode honoured: the key is
// the provider's (FI_MR_PROV_KEY) or ours, the remote base is the virtual
// address (FI_MR_VIRT_ADDR) or 0, FI_MR_ENDPOINT binds it to the rail's
// endpoint, FI_MR_LOCAL gives the descriptor local writes must pass.
class Registration {
public:
    Registration(Endpoint &endpoint, void *buf, size_t len, uint64_t access, uint64_t requested_key);
    ~Registration();
    Registration(const Registration &) = delete;
    Registration &operator=(const Registration &) = delete;

    void *desc() const { return desc_; }
    uint64_t key() const { return key_; }
    // The address a peer passes to fi_write for byte 0 of the buffer.
    uint64_t remote_base() const { return remote_base_; }

private:
    fid_mr *mr_ = nullptr;
    void *desc_ = nullptr;
    uint64_t key_ = 0;
    uint64_t remote_base_ = 0;
};

}  // namespace deputy::fabric
