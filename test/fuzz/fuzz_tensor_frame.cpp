#include "fuzz_targets.hpp"

#include <string_view>

#include "tensor_frame.hpp"

namespace actorflow::fuzz {

bool fuzz_tensor_frame(const uint8_t* data, size_t size) {
  return tensor_channel::decode_frame(
    {reinterpret_cast<const char*>(data), size});
}

} // namespace actorflow::fuzz

#ifdef ACTORFLOW_LIBFUZZER
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  actorflow::fuzz::fuzz_tensor_frame(data, size);
  return 0;
}
#endif
