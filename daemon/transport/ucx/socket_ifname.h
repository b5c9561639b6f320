// NCCL_SOCKET_IFNAME syntax -> the interface list UCX_NET_DEVICES takes. No UCX here: the pure
// part is unit tested against made-up interface lists.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hc::transport::ucx {

// The interfaces of `available` (in their order) that `spec` selects:
//   "eth,ib"      names starting with "eth" or "ib";
//   "=eth0,lo"    exactly "eth0" or "lo";
//   "^docker,lo"  every interface except those starting with "docker" or "lo";
//   "^=docker0"   every interface except exactly "docker0".
// Empty entries are ignored. InvalidArgument when the spec selects nothing (an empty spec
// included: the caller treats "no spec" as "every interface" before asking).
[[nodiscard]] Result<std::vector<std::string>> selectInterfaces(
    std::string_view spec, const std::vector<std::string>& available);

// This host's interfaces that are up and carry an IPv4 or IPv6 address, each named once: the
// ones UCX's tcp transport can use.
[[nodiscard]] Result<std::vector<std::string>> listNetworkInterfaces();

// This host's RDMA device ports as UCX names them ("mlx5_0:1"), from /sys/class/infiniband.
std::vector<std::string> listRdmaPorts();

// UCX_NET_DEVICES for `spec` on this host: the selected interfaces, then every RDMA port, joined
// by commas. UCX_NET_DEVICES filters RDMA devices too, and the socket spec must not switch them
// off (NCCL keeps the two apart as well: NCCL_SOCKET_IFNAME and NCCL_IB_HCA).
[[nodiscard]] Result<std::string> netDevicesFor(std::string_view spec);

}  // namespace hc::transport::ucx
