#include "common/vocabulary.h"

#include <string>

namespace hc {

Result<OpType> checkedOpType(long long value) {
  if (auto op = opTypeFrom(value)) return *op;
  return invalidArgument("unknown operation " + std::to_string(value));
}

Result<Dtype> checkedDtype(long long value) {
  if (auto d = dtypeFrom(value)) return *d;
  return invalidArgument("unknown dtype " + std::to_string(value));
}

Result<RedOp> checkedRedOp(long long value) {
  if (auto op = redOpFrom(value)) return *op;
  return invalidArgument("unknown reduction operator " + std::to_string(value));
}

Status checkReduction(long long dtype, long long redop) {
  auto d = checkedDtype(dtype);
  if (!d.isOk()) return d.status();
  auto op = checkedRedOp(redop);
  if (!op.isOk()) return op.status();
  if (!isImplemented(*d, *op)) {
    return invalidArgument(std::string(redOpName(*op)) + " is not implemented for " +
                           dtypeName(*d));
  }
  return okStatus();
}

std::optional<Dtype> dtypeNamed(std::string_view name) {
  for (uint8_t v = 0; v < kNumDtypes; ++v) {
    const auto d = static_cast<Dtype>(v);
    if (name == dtypeName(d) || name == ncclTestsDtypeName(d)) return d;
  }
  if (name == "bf16") return Dtype::Bfloat16;
  return std::nullopt;
}

}  // namespace hc
