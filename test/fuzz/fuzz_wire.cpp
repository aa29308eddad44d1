#include "fuzz_targets.hpp"

#include <string>
#include <string_view>

#include "actorflow/graph/graph_def.hpp"
#include "actorflow/graph/wire.hpp"

namespace actorflow::fuzz {

bool fuzz_wire(const uint8_t* data, size_t size) {
  if (size == 0)
    return false;
  std::string_view in{reinterpret_cast<const char*>(data) + 1, size - 1};
  switch (data[0] % 3) {
    case 0: {
      tensor x;
      if (!from_bytes(in, x).ok())
        return false;
      // What decodes is one tensor, written back the same way.
      if (to_bytes(x) != in)
        __builtin_trap();
      return true;
    }
    case 1: {
      graph_def g;
      if (!from_bytes(in, g).ok())
        return false;
      graph_def again;
      if (!from_bytes(to_bytes(g), again).ok())
        __builtin_trap();
      return true;
    }
    default: {
      tensor x;
      size_t header_size = 0;
      // As the tensor channel calls it: at most 1 GiB of data to come.
      if (!tensor_from_header(in, x, header_size, uint64_t{1} << 30).ok())
        return false;
      if (header_size > in.size())
        __builtin_trap();
      return true;
    }
  }
}

} // namespace actorflow::fuzz

#ifdef ACTORFLOW_LIBFUZZER
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  actorflow::fuzz::fuzz_wire(data, size);
  return 0;
}
#endif
