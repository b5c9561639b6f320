// ncclCommRegister / ncclCommDeregister over hc_comm_register / hc_comm_deregister: device
// memory is imported by the daemon at registration (its first operation imports nothing) and
// kept while registered; ncclMemAlloc memory needs nothing more; other host memory is checked
// (cross-memory attach) or merely noted (staged on every operation, as without registration).
#include "shim/src/shim.h"

using hc::shim::asHc;
using hc::shim::fail;
using hc::shim::fromHc;

extern "C" {

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommRegister: comm is NULL");
  const hc_status_t s = hc_comm_register(asHc(comm), buff, size, handle);
  // Never ncclInProgress: nothing was registered on a communicator still initializing.
  if (s == HC_IN_PROGRESS) return hc::shim::notReady(comm);
  return fromHc(s, comm);
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommDeregister: comm is NULL");
  return fromHc(hc_comm_deregister(asHc(comm), handle), comm);
}

}  // extern "C"

HC_NCCL_TWIN(ncclCommRegister)
HC_NCCL_TWIN(ncclCommDeregister)
