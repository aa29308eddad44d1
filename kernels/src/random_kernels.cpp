// RandomUniform, RandomStandardNormal and TruncatedNormal over the node's
// std::mt19937_64. The standard library's distributions are
// implementation-defined, so the transforms are written out here: the same
// generator state yields the same tensor with any standard library (normals
// only depend on libm's log, sin and cos besides).

#include <cmath>
#include <cstdint>
#include <cstring>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "kernels_impl.hpp"

namespace actorflow::detail {

namespace {

// U[0, 1) from the top 24 bits of one draw: every float in the result is a
// multiple of 2^-24, so none rounds up to 1.
float uniform_float(std::mt19937_64& rng) {
  return static_cast<float>(rng() >> 40) * 0x1.0p-24f;
}

// U[0, 1) from the top 53 bits of one draw.
double uniform_double(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

template <class T>
T uniform(std::mt19937_64& rng) {
  if constexpr (std::is_same_v<T, float>)
    return uniform_float(rng);
  else
    return uniform_double(rng);
}

// Standard normal samples by the Box-Muller transform, computed in double
// for either output type. Each pair of uniform draws gives two samples; the
// second is kept for the next call.
class normal_source {
public:
  explicit normal_source(std::mt19937_64& rng) : rng_(rng) {
    // nop
  }

  double next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    // 1 - u lies in (0, 1], keeping the logarithm finite.
    auto u1 = 1.0 - uniform_double(rng_);
    auto u2 = uniform_double(rng_);
    auto r = std::sqrt(-2.0 * std::log(u1));
    auto theta = 2.0 * std::numbers::pi * u2;
    spare_ = r * std::sin(theta);
    has_spare_ = true;
    return r * std::cos(theta);
  }

private:
  std::mt19937_64& rng_;
  double spare_ = 0;
  bool has_spare_ = false;
};

enum class dist { uniform, normal, truncated_normal };

template <dist D>
status random_kernel(kernel_context& ctx) {
  dtype type = dtype::invalid;
  if (auto st = read_required_attr(ctx, "dtype", type); !st.ok())
    return st;
  int64_t seed = 0;
  int64_t seed2 = 0;
  // The executor seeds ctx.rng from these; read them only to reject
  // attributes of the wrong kind.
  if (auto st = read_attr(ctx, "seed", seed); !st.ok())
    return st;
  if (auto st = read_attr(ctx, "seed2", seed2); !st.ok())
    return st;
  std::vector<int64_t> dims;
  if (auto st = read_int_vector(ctx, ctx.inputs[0], "shape", dims); !st.ok())
    return st;
  tensor_shape shape;
  if (auto st = make_shape(dims, shape); !st.ok())
    return st;
  if (ctx.rng == nullptr)
    return internal_error(ctx.node.op + " was run without a random generator");
  auto& rng = *ctx.rng;
  return visit_float(ctx, type, [&]<class T>(type_tag<T>) -> status {
    tensor out{type, std::move(shape)};
    auto xs = out.flat<T>();
    if constexpr (D == dist::uniform) {
      for (auto& x : xs)
        x = uniform<T>(rng);
    } else {
      normal_source normal{rng};
      for (auto& x : xs) {
        auto v = normal.next();
        if constexpr (D == dist::truncated_normal)
          while (std::fabs(v) > 2.0)
            v = normal.next();
        x = static_cast<T>(v);
      }
    }
    ctx.outputs.push_back(std::move(out));
    return {};
  });
}

// RandomShuffle: a Fisher-Yates permutation of the rows (dim 0), as TF's
// kernel; any dtype, strings included.
status random_shuffle_kernel(kernel_context& ctx) {
  if (ctx.rng == nullptr)
    return internal_error(ctx.node.op + " was run without a random generator");
  auto& in = ctx.inputs[0];
  if (in.shape().rank() == 0 || in.shape().dim(0) <= 1) {
    ctx.outputs.push_back(in);
    return {};
  }
  auto rows = static_cast<size_t>(in.shape().dim(0));
  std::vector<size_t> perm(rows);
  for (size_t i = 0; i < rows; ++i)
    perm[i] = i;
  for (size_t i = rows - 1; i > 0; --i)
    std::swap(perm[i], perm[(*ctx.rng)() % (i + 1)]);
  tensor out{in.type(), in.shape()};
  auto row_elems = static_cast<size_t>(in.num_elements()) / rows;
  if (in.type() == dtype::string) {
    auto src = in.flat<std::string>();
    auto dst = out.flat<std::string>();
    for (size_t r = 0; r < rows; ++r)
      for (size_t k = 0; k < row_elems; ++k)
        dst[r * row_elems + k] = src[perm[r] * row_elems + k];
  } else {
    auto row_bytes = in.byte_size() / rows;
    auto src = static_cast<const char*>(in.raw());
    auto dst = static_cast<char*>(out.raw());
    for (size_t r = 0; r < rows; ++r)
      std::memcpy(dst + r * row_bytes, src + perm[r] * row_bytes, row_bytes);
  }
  ctx.outputs.push_back(std::move(out));
  return {};
}

} // namespace

void register_random_kernels(kernel_registry& registry) {
  constexpr auto one = inputs(1);
  add_kernel<random_shuffle_kernel, one>(registry, "RandomShuffle");
  add_kernel<random_kernel<dist::uniform>, one>(registry, "RandomUniform");
  add_kernel<random_kernel<dist::normal>, one>(registry,
                                               "RandomStandardNormal");
  add_kernel<random_kernel<dist::truncated_normal>, one>(registry,
                                                         "TruncatedNormal");
}

} // namespace actorflow::detail
