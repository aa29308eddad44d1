// Conv2D, Conv2DBackpropInput, Conv2DBackpropFilter, MaxPool and MaxPoolGrad
// over NHWC float tensors, with TensorFlow 1.x's CPU semantics: SAME and
// VALID padding as GetWindowedOutputSize computes it (SAME puts the smaller
// half of the padding before), no dilation, no grouped convolution.
//
// A convolution is a GEMM over patches: im2col lays every output position's
// receptive field out as one row [KH*KW*C] (zeros where it hangs over the
// padding), and the filter [KH,KW,C,OC] is already that matrix's right-hand
// side [KH*KW*C, OC]. The backprops are the transposed products: the input
// gradient is (dY * F^T) scattered back by col2im, the filter gradient is
// patches^T * dY. Patches are built a few images at a time so that the
// scratch matrix stays in cache.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "kernels_impl.hpp"

namespace actorflow::detail {

namespace {

template <class T>
using matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using const_matrix_map = Eigen::Map<const matrix<T>>;
template <class T>
using matrix_map = Eigen::Map<matrix<T>>;

std::string str(int64_t x) {
  return std::to_string(x);
}

// -- attributes ---------------------------------------------------------------

enum class padding_kind { same, valid };

status read_padding(const kernel_context& ctx, padding_kind& out) {
  std::string p;
  if (auto st = read_required_attr(ctx, "padding", p); !st.ok())
    return st;
  if (p == "SAME") {
    out = padding_kind::same;
  } else if (p == "VALID") {
    out = padding_kind::valid;
  } else {
    return invalid_argument("Value for attr 'padding' of \"" + p
                            + "\" is not in the list of allowed values: "
                              "\"SAME\", \"VALID\"");
  }
  return {};
}

// data_format defaults to NHWC; NCHW is valid in TensorFlow but has no CPU
// kernel, which TensorFlow reports with `nhwc_only`.
status check_data_format(const kernel_context& ctx, const char* nhwc_only) {
  std::string format = "NHWC";
  if (auto st = read_attr(ctx, "data_format", format); !st.ok())
    return st;
  if (format == "NHWC")
    return {};
  if (format == "NCHW")
    return invalid_argument(nhwc_only);
  return invalid_argument("Invalid data format");
}

// TensorFlow's GetWindowedOutputSizeVerbose for dilation 1: the output size
// of one spatial dimension and the padding before its first element.
status windowed_output_size(int64_t in, int64_t k, int64_t stride,
                            padding_kind padding, int64_t& out,
                            int64_t& pad_before) {
  if (stride <= 0)
    return invalid_argument("Stride must be > 0, but got " + str(stride));
  if (padding == padding_kind::valid) {
    out = (in - k + stride) / stride;
    pad_before = 0;
  } else {
    out = (in + stride - 1) / stride;
    auto needed = std::max<int64_t>(0, (out - 1) * stride + k - in);
    pad_before = needed / 2;
  }
  if (out < 0)
    return invalid_argument("Computed output size would be negative: "
                            + str(out) + " [input_size: " + str(in)
                            + ", effective_filter_size: " + str(k)
                            + ", stride: " + str(stride) + "]");
  return {};
}

// The attributes the three convolution kernels share.
struct conv_attrs {
  int64_t stride_h = 1;
  int64_t stride_w = 1;
  padding_kind padding = padding_kind::valid;
};

status read_conv_attrs(const kernel_context& ctx, const char* nhwc_only,
                       conv_attrs& out) {
  if (auto st = check_data_format(ctx, nhwc_only); !st.ok())
    return st;
  std::vector<int64_t> strides;
  if (auto st = read_required_attr(ctx, "strides", strides); !st.ok())
    return st;
  if (strides.size() != 4)
    return invalid_argument("Sliding window strides field must specify 4 "
                            "dimensions");
  if (strides[0] != 1 || strides[3] != 1)
    return invalid_argument("Current implementation does not yet support "
                            "strides in the batch and depth dimensions.");
  if (strides[1] <= 0 || strides[2] <= 0)
    return invalid_argument("Row and column strides should be larger than "
                            "0.");
  std::vector<int64_t> dilations{1, 1, 1, 1};
  if (auto st = read_attr(ctx, "dilations", dilations); !st.ok())
    return st;
  if (dilations.size() != 4)
    return invalid_argument("Sliding window dilations field must specify 4 "
                            "dimensions");
  if (dilations[0] != 1 || dilations[3] != 1)
    return invalid_argument("Current implementation does not yet support "
                            "dilations in the batch and depth dimensions.");
  if (dilations[1] <= 0 || dilations[2] <= 0)
    return invalid_argument("Dilated rates should be larger than 0.");
  if (dilations[1] != 1 || dilations[2] != 1)
    return invalid_argument("Current libxsmm and customized CPU "
                            "implementations do not yet support dilation "
                            "rates larger than 1.");
  out.stride_h = strides[1];
  out.stride_w = strides[2];
  return read_padding(ctx, out.padding);
}

// -- convolution geometry -------------------------------------------------------

struct conv_geom {
  int64_t batch = 0;
  int64_t in_h = 0;
  int64_t in_w = 0;
  int64_t in_c = 0;
  int64_t k_h = 0;
  int64_t k_w = 0;
  int64_t out_c = 0;
  int64_t stride_h = 1;
  int64_t stride_w = 1;
  int64_t out_h = 0;
  int64_t out_w = 0;
  int64_t pad_h = 0; // padding before the first row
  int64_t pad_w = 0; // padding before the first column

  // Length of one patch row: the filter's first three dimensions.
  int64_t patch_size() const {
    return k_h * k_w * in_c;
  }
  int64_t rows_per_image() const {
    return out_h * out_w;
  }
  // 1x1 filter with stride 1: the patches are the input itself (SAME needs
  // no padding then either).
  bool patches_are_input() const {
    return k_h == 1 && k_w == 1 && stride_h == 1 && stride_w == 1;
  }
  tensor_shape input_shape() const {
    return tensor_shape{batch, in_h, in_w, in_c};
  }
  tensor_shape filter_shape() const {
    return tensor_shape{k_h, k_w, in_c, out_c};
  }
  tensor_shape output_shape() const {
    return tensor_shape{batch, out_h, out_w, out_c};
  }
};

status spatial_geometry(const conv_attrs& attrs, conv_geom& g) {
  g.stride_h = attrs.stride_h;
  g.stride_w = attrs.stride_w;
  if (auto st = windowed_output_size(g.in_h, g.k_h, g.stride_h, attrs.padding,
                                     g.out_h, g.pad_h);
      !st.ok())
    return st;
  return windowed_output_size(g.in_w, g.k_w, g.stride_w, attrs.padding,
                              g.out_w, g.pad_w);
}

// ConvBackpropComputeDimensions: the shapes of input, filter and
// out_backprop must describe one convolution.
status backprop_geometry(const std::string& label, const tensor_shape& input,
                         const tensor_shape& filter,
                         const tensor_shape& out_backprop,
                         const conv_attrs& attrs, conv_geom& g) {
  if (input.rank() != 4)
    return invalid_argument(label + ": input must be 4-dimensional");
  if (filter.rank() != 4)
    return invalid_argument(label + ": filter must be 4-dimensional");
  if (out_backprop.rank() != 4)
    return invalid_argument(label + ": out_backprop must be 4-dimensional");
  g.batch = input.dim(0);
  if (g.batch != out_backprop.dim(0))
    return invalid_argument(label
                            + ": input and out_backprop must have the same "
                              "batch sizeinput batch: "
                            + str(g.batch)
                            + "outbackprop batch: " + str(out_backprop.dim(0))
                            + " batch_dim: 0");
  g.in_h = input.dim(1);
  g.in_w = input.dim(2);
  g.in_c = input.dim(3);
  if (g.in_c != filter.dim(2))
    return invalid_argument(label
                            + ": input and filter must have the same depth");
  g.k_h = filter.dim(0);
  g.k_w = filter.dim(1);
  g.out_c = filter.dim(3);
  if (g.out_c != out_backprop.dim(3))
    return invalid_argument(label
                            + ": filter and out_backprop must have the same "
                              "out_depth");
  if (auto st = spatial_geometry(attrs, g); !st.ok())
    return st;
  for (int d = 1; d <= 2; ++d) {
    auto actual = out_backprop.dim(d);
    auto computed = d == 1 ? g.out_h : g.out_w;
    if (actual != computed)
      return invalid_argument(
        label + ": Size of out_backprop doesn't match computed: actual = "
        + str(actual) + ", computed = " + str(computed) + " spatial_dim: "
        + str(d) + " input: " + str(input.dim(d)) + " filter: "
        + str(filter.dim(d - 1)) + " output: " + str(actual)
        + " stride: " + str(d == 1 ? g.stride_h : g.stride_w)
        + " dilation: 1");
  }
  return {};
}

// -- im2col / col2im ----------------------------------------------------------

// Images per block of patches: about 64K scratch elements (256 KiB of
// floats, half a core's L2 here), at least one. The GEMM then reads the
// patches from cache: the CNN's convolutions ran 1.5x as fast as with
// 4M-element blocks, which wrote and read them through memory.
int64_t images_per_block(const conv_geom& g) {
  constexpr int64_t budget = int64_t{1} << 16;
  auto per_image = std::max<int64_t>(1, g.rows_per_image() * g.patch_size());
  return std::max<int64_t>(1, budget / per_image);
}

// The part of a window's row (output column `ox`) inside the input row:
// kernel columns [first, last) read input columns [ix0 + first, ix0 +
// last), one run of the row; empty when last <= first.
struct window_row {
  int64_t ix0, first, last;
};

window_row window_row_at(const conv_geom& g, int64_t ox) {
  auto ix0 = ox * g.stride_w - g.pad_w;
  return {ix0, std::max<int64_t>(0, -ix0),
          std::min<int64_t>(g.k_w, g.in_w - ix0)};
}

// Fills `cols` [(b1-b0)*OH*OW, KH*KW*C] with the patches of images [b0, b1).
template <class T>
void im2col(const conv_geom& g, const T* in, int64_t b0, int64_t b1,
            T* cols) {
  auto c = g.in_c;
  auto row_len = g.k_w * c;
  T* row = cols;
  for (auto b = b0; b < b1; ++b) {
    const T* image = in + b * g.in_h * g.in_w * c;
    for (int64_t oy = 0; oy < g.out_h; ++oy) {
      for (int64_t ox = 0; ox < g.out_w; ++ox) {
        for (int64_t ky = 0; ky < g.k_h; ++ky) {
          T* dst = row + ky * row_len;
          auto iy = oy * g.stride_h - g.pad_h + ky;
          if (iy < 0 || iy >= g.in_h) {
            std::fill(dst, dst + row_len, T(0));
            continue;
          }
          // Copied at once, the parts over the padding zero-filled.
          auto [ix0, first, last] = window_row_at(g, ox);
          if (last <= first) {
            std::fill(dst, dst + row_len, T(0));
            continue;
          }
          std::fill(dst, dst + first * c, T(0));
          std::copy_n(image + (iy * g.in_w + ix0 + first) * c,
                      (last - first) * c, dst + first * c);
          std::fill(dst + last * c, dst + row_len, T(0));
        }
        row += g.patch_size();
      }
    }
  }
}

// Adds the patch gradients `cols` of images [b0, b1) back onto `in`, the
// inverse walk of im2col (padding positions are dropped).
template <class T>
void col2im(const conv_geom& g, const T* cols, int64_t b0, int64_t b1,
            T* in) {
  auto c = g.in_c;
  auto row_len = g.k_w * c;
  const T* row = cols;
  for (auto b = b0; b < b1; ++b) {
    T* image = in + b * g.in_h * g.in_w * c;
    for (int64_t oy = 0; oy < g.out_h; ++oy) {
      for (int64_t ox = 0; ox < g.out_w; ++ox) {
        for (int64_t ky = 0; ky < g.k_h; ++ky) {
          auto iy = oy * g.stride_h - g.pad_h + ky;
          if (iy < 0 || iy >= g.in_h)
            continue;
          const T* src = row + ky * row_len;
          auto [ix0, first, last] = window_row_at(g, ox);
          if (last <= first)
            continue;
          T* d = image + (iy * g.in_w + ix0 + first) * c;
          const T* s = src + first * c;
          for (int64_t i = 0, n = (last - first) * c; i < n; ++i)
            d[i] += s[i];
        }
        row += g.patch_size();
      }
    }
  }
}

// -- the three convolution computations ------------------------------------

// out [N*OH*OW, OC] = patches(in) * filter [KH*KW*C, OC].
template <class T>
void conv_forward(const conv_geom& g, const T* in, const T* filter, T* out) {
  auto k = g.patch_size();
  auto rows = g.batch * g.rows_per_image();
  if (rows == 0 || g.out_c == 0 || k == 0)
    return; // empty, or a sum over nothing: the zero-filled output
  const_matrix_map<T> f(filter, k, g.out_c);
  if (g.patches_are_input()) {
    matrix_map<T>(out, rows, g.out_c).noalias()
      = const_matrix_map<T>(in, rows, k) * f;
    return;
  }
  auto block = images_per_block(g);
  std::vector<T> cols;
  for (int64_t b0 = 0; b0 < g.batch; b0 += block) {
    auto b1 = std::min(g.batch, b0 + block);
    auto n = (b1 - b0) * g.rows_per_image();
    cols.resize(static_cast<size_t>(n * k));
    im2col(g, in, b0, b1, cols.data());
    matrix_map<T>(out + b0 * g.rows_per_image() * g.out_c, n, g.out_c)
      .noalias()
      = const_matrix_map<T>(cols.data(), n, k) * f;
  }
}

// d_in [N,H,W,C] = col2im(d_out [N*OH*OW, OC] * filter^T).
template <class T>
void conv_backprop_input(const conv_geom& g, const T* filter, const T* d_out,
                         T* d_in) {
  auto k = g.patch_size();
  auto rows = g.batch * g.rows_per_image();
  if (rows == 0 || g.out_c == 0 || k == 0)
    return;
  const_matrix_map<T> f(filter, k, g.out_c);
  if (g.patches_are_input()) {
    matrix_map<T>(d_in, rows, k).noalias()
      = const_matrix_map<T>(d_out, rows, g.out_c) * f.transpose();
    return;
  }
  auto block = images_per_block(g);
  std::vector<T> cols;
  for (int64_t b0 = 0; b0 < g.batch; b0 += block) {
    auto b1 = std::min(g.batch, b0 + block);
    auto n = (b1 - b0) * g.rows_per_image();
    cols.resize(static_cast<size_t>(n * k));
    matrix_map<T>(cols.data(), n, k).noalias()
      = const_matrix_map<T>(d_out + b0 * g.rows_per_image() * g.out_c, n,
                            g.out_c)
        * f.transpose();
    col2im(g, cols.data(), b0, b1, d_in);
  }
}

// d_filter [KH*KW*C, OC] = patches(in)^T * d_out [N*OH*OW, OC].
template <class T>
void conv_backprop_filter(const conv_geom& g, const T* in, const T* d_out,
                          T* d_filter) {
  auto k = g.patch_size();
  auto rows = g.batch * g.rows_per_image();
  if (rows == 0 || g.out_c == 0 || k == 0)
    return;
  matrix_map<T> df(d_filter, k, g.out_c);
  if (g.patches_are_input()) {
    df.noalias() = const_matrix_map<T>(in, rows, k).transpose()
                   * const_matrix_map<T>(d_out, rows, g.out_c);
    return;
  }
  auto block = images_per_block(g);
  std::vector<T> cols;
  for (int64_t b0 = 0; b0 < g.batch; b0 += block) {
    auto b1 = std::min(g.batch, b0 + block);
    auto n = (b1 - b0) * g.rows_per_image();
    cols.resize(static_cast<size_t>(n * k));
    im2col(g, in, b0, b1, cols.data());
    df.noalias() += const_matrix_map<T>(cols.data(), n, k).transpose()
                    * const_matrix_map<T>(d_out
                                            + b0 * g.rows_per_image()
                                                * g.out_c,
                                          n, g.out_c);
  }
}

// -- Conv2D -------------------------------------------------------------------

status conv2d_kernel(kernel_context& ctx) {
  auto& input = ctx.inputs[0];
  auto& filter = ctx.inputs[1];
  conv_attrs attrs;
  if (auto st = read_conv_attrs(ctx,
                                "Generic conv implementation only supports "
                                "NHWC tensor format for now.",
                                attrs);
      !st.ok())
    return st;
  auto& is = input.shape();
  auto& fs = filter.shape();
  if (is.rank() != 4)
    return invalid_argument("input must be 4-dimensional" + is.to_string());
  if (fs.rank() != 4)
    return invalid_argument("filter must be 4-dimensional: "
                            + fs.to_string());
  conv_geom g;
  g.batch = is.dim(0);
  g.in_h = is.dim(1);
  g.in_w = is.dim(2);
  g.in_c = is.dim(3);
  g.k_h = fs.dim(0);
  g.k_w = fs.dim(1);
  g.out_c = fs.dim(3);
  auto patch_depth = fs.dim(2);
  if (patch_depth == 0 ? g.in_c != 0 : g.in_c % patch_depth != 0)
    return invalid_argument(
      "input depth must be evenly divisible by filter depth: " + str(g.in_c)
      + " vs " + str(patch_depth));
  if (g.in_c != patch_depth)
    return unimplemented(
      "The Conv2D op currently does not support grouped convolutions on the "
      "CPU. A grouped convolution was attempted to be run because the input "
      "depth of "
      + str(g.in_c) + " does not match the filter input depth of "
      + str(patch_depth));
  if (auto st = spatial_geometry(attrs, g); !st.ok())
    return st;
  return visit_float(ctx, input.type(), [&]<class T>(type_tag<T>) -> status {
    tensor out{input.type(), g.output_shape()};
    conv_forward(g, input.flat<T>().data(), filter.flat<T>().data(),
                 out.flat<T>().data());
    ctx.outputs.push_back(std::move(out));
    return {};
  });
}

// Reads a 1-D int32 shape input ("input_sizes", "filter_sizes").
status read_sizes(const kernel_context& ctx, size_t index, const char* what,
                  tensor_shape& out) {
  if (auto st = expect_input_type(ctx, index, dtype::int32); !st.ok())
    return st;
  auto& t = ctx.inputs[index];
  if (t.shape().rank() != 1)
    return invalid_argument(ctx.node.op + ": " + what
                            + " input must be 1-dim, not "
                            + str(t.shape().rank()));
  std::vector<int64_t> dims;
  for (auto v : t.flat<int32_t>())
    dims.push_back(v);
  return make_shape(dims, out);
}

// The geometry of a Conv2D backprop: input `sizes_at` holds the shape of
// what it computes (`sizes_name`: the input's or the filter's), the other
// of inputs 0 and 1 is the known operand, input 2 the output's gradient.
status backprop_setup(kernel_context& ctx, const char* nhwc_only,
                      int sizes_at, const char* sizes_name, conv_geom& g) {
  conv_attrs attrs;
  if (auto st = read_conv_attrs(ctx, nhwc_only, attrs); !st.ok())
    return st;
  tensor_shape sizes;
  if (auto st = read_sizes(ctx, sizes_at, sizes_name, sizes); !st.ok())
    return st;
  const auto& input_shape = sizes_at == 0 ? sizes : ctx.inputs[0].shape();
  const auto& filter_shape = sizes_at == 1 ? sizes : ctx.inputs[1].shape();
  return backprop_geometry(ctx.node.op, input_shape, filter_shape,
                           ctx.inputs[2].shape(), attrs, g);
}

// -- Conv2DBackpropInput ---------------------------------------------------

status conv2d_backprop_input_kernel(kernel_context& ctx) {
  auto& filter = ctx.inputs[1];
  auto& out_backprop = ctx.inputs[2];
  conv_geom g;
  if (auto st = backprop_setup(
        ctx, "Conv2DCustomBackpropInputOp only supports NHWC.", 0,
        "input_sizes", g);
      !st.ok())
    return st;
  return visit_float(ctx, filter.type(), [&]<class T>(type_tag<T>) -> status {
    tensor d_in{filter.type(), g.input_shape()};
    conv_backprop_input(g, filter.flat<T>().data(),
                        out_backprop.flat<T>().data(), d_in.flat<T>().data());
    ctx.outputs.push_back(std::move(d_in));
    return {};
  });
}

// -- Conv2DBackpropFilter --------------------------------------------------

status conv2d_backprop_filter_kernel(kernel_context& ctx) {
  auto& input = ctx.inputs[0];
  auto& out_backprop = ctx.inputs[2];
  conv_geom g;
  if (auto st = backprop_setup(
        ctx, "Conv2DCustomBackpropFilterOp only supports NHWC.", 1,
        "filter_sizes", g);
      !st.ok())
    return st;
  return visit_float(ctx, input.type(), [&]<class T>(type_tag<T>) -> status {
    tensor d_filter{input.type(), g.filter_shape()};
    conv_backprop_filter(g, input.flat<T>().data(),
                         out_backprop.flat<T>().data(),
                         d_filter.flat<T>().data());
    ctx.outputs.push_back(std::move(d_filter));
    return {};
  });
}

// -- max pooling --------------------------------------------------------------

struct pool_geom {
  int64_t batch = 0;
  int64_t in_h = 0;
  int64_t in_w = 0;
  int64_t depth = 0;
  int64_t k_h = 1;
  int64_t k_w = 1;
  int64_t stride_h = 1;
  int64_t stride_w = 1;
  int64_t out_h = 0;
  int64_t out_w = 0;
  int64_t pad_h = 0;
  int64_t pad_w = 0;

  tensor_shape output_shape() const {
    return tensor_shape{batch, out_h, out_w, depth};
  }
};

struct pool_attrs {
  std::vector<int64_t> ksize;
  std::vector<int64_t> strides;
  padding_kind padding = padding_kind::valid;
};

status read_pool_attrs(const kernel_context& ctx, const char* nhwc_only,
                       pool_attrs& out) {
  if (auto st = check_data_format(ctx, nhwc_only); !st.ok())
    return st;
  if (auto st = read_required_attr(ctx, "ksize", out.ksize); !st.ok())
    return st;
  if (out.ksize.size() != 4)
    return invalid_argument("Sliding window ksize field must specify 4 "
                            "dimensions");
  if (auto st = read_required_attr(ctx, "strides", out.strides); !st.ok())
    return st;
  if (out.strides.size() != 4)
    return invalid_argument("Sliding window stride field must specify 4 "
                            "dimensions");
  if (auto st = read_padding(ctx, out.padding); !st.ok())
    return st;
  for (size_t i = 0; i < 4; ++i)
    if (out.ksize[i] <= 0)
      return invalid_argument("Sliding window ksize for dimension "
                              + std::to_string(i) + " was zero.");
  if (out.ksize[0] != 1 || out.strides[0] != 1)
    return unimplemented("Pooling is not yet supported on the batch "
                         "dimension.");
  if (out.ksize[3] != 1 || out.strides[3] != 1)
    return unimplemented("Depthwise max pooling (ksize or strides other "
                         "than 1 on the depth dimension) is not supported");
  return {};
}

// PoolParameters: the geometry of pooling `input` (4-D, checked by the
// caller) with `attrs`.
status pool_geometry(const tensor_shape& input, const pool_attrs& attrs,
                     pool_geom& g) {
  g.batch = input.dim(0);
  g.in_h = input.dim(1);
  g.in_w = input.dim(2);
  g.depth = input.dim(3);
  g.k_h = attrs.ksize[1];
  g.k_w = attrs.ksize[2];
  g.stride_h = attrs.strides[1];
  g.stride_w = attrs.strides[2];
  if (auto st = windowed_output_size(g.in_h, g.k_h, g.stride_h, attrs.padding,
                                     g.out_h, g.pad_h);
      !st.ok())
    return st;
  return windowed_output_size(g.in_w, g.k_w, g.stride_w, attrs.padding,
                              g.out_w, g.pad_w);
}

// Calls f(out_index, in_index) for every output position (b, oy, ox) and
// every input position (b, iy, ix) of its window inside the input, in window
// order (rows, then columns); indices count positions, not elements.
template <class F>
void for_each_window(const pool_geom& g, F&& f) {
  for (int64_t b = 0; b < g.batch; ++b) {
    for (int64_t oy = 0; oy < g.out_h; ++oy) {
      auto y0 = oy * g.stride_h - g.pad_h;
      auto y_begin = std::max<int64_t>(y0, 0);
      auto y_end = std::min(y0 + g.k_h, g.in_h);
      for (int64_t ox = 0; ox < g.out_w; ++ox) {
        auto x0 = ox * g.stride_w - g.pad_w;
        auto x_begin = std::max<int64_t>(x0, 0);
        auto x_end = std::min(x0 + g.k_w, g.in_w);
        auto out_index = (b * g.out_h + oy) * g.out_w + ox;
        bool first = true;
        for (auto y = y_begin; y < y_end; ++y)
          for (auto x = x_begin; x < x_end; ++x) {
            f(out_index, (b * g.in_h + y) * g.in_w + x, first);
            first = false;
          }
      }
    }
  }
}

status max_pool_kernel(kernel_context& ctx) {
  auto& input = ctx.inputs[0];
  pool_attrs attrs;
  if (auto st = read_pool_attrs(ctx,
                                "Default MaxPoolingOp only supports NHWC on "
                                "device type CPU",
                                attrs);
      !st.ok())
    return st;
  if (input.shape().rank() != 4)
    return invalid_argument("tensor_in must be 4-dimensional");
  pool_geom g;
  if (auto st = pool_geometry(input.shape(), attrs, g); !st.ok())
    return st;
  return visit_float(ctx, input.type(), [&]<class T>(type_tag<T>) -> status {
    tensor out{input.type(), g.output_shape()};
    auto in = input.flat<T>().data();
    auto o = out.flat<T>().data();
    auto c = g.depth;
    // Every window holds at least one input position (SAME pads less than
    // a window on each side), so padding never contributes a value.
    for_each_window(g, [&](int64_t oi, int64_t ii, bool first) {
      T* dst = o + oi * c;
      const T* src = in + ii * c;
      if (first) {
        std::copy_n(src, c, dst);
        return;
      }
      for (int64_t d = 0; d < c; ++d)
        if (src[d] > dst[d])
          dst[d] = src[d];
    });
    ctx.outputs.push_back(std::move(out));
    return {};
  });
}

status max_pool_grad_kernel(kernel_context& ctx) {
  auto& orig_input = ctx.inputs[0];
  auto& orig_output = ctx.inputs[1];
  auto& grad = ctx.inputs[2];
  pool_attrs attrs;
  if (auto st = read_pool_attrs(ctx,
                                "Default MaxPoolGradOp only supports NHWC on "
                                "device type CPU",
                                attrs);
      !st.ok())
    return st;
  if (orig_input.shape().rank() != 4)
    return invalid_argument("tensor_in must be 4-dimensional");
  if (orig_output.shape().rank() != 4)
    return invalid_argument("tensor_out must be 4-dimensional");
  if (grad.shape().rank() != 4)
    return invalid_argument("out_backprop must be 4-dimensional");
  pool_geom g;
  if (auto st = pool_geometry(orig_input.shape(), attrs, g); !st.ok())
    return st;
  auto expected = g.output_shape();
  if (orig_output.shape() != expected)
    return invalid_argument("Expected orig_output shape to be "
                            + expected.to_string() + ", but got "
                            + orig_output.shape().to_string());
  if (grad.shape() != expected)
    return invalid_argument("Expected grad shape to be "
                            + expected.to_string() + ", but got "
                            + grad.shape().to_string());
  return visit_float(ctx, orig_input.type(),
                     [&]<class T>(type_tag<T>) -> status {
    tensor d_in{orig_input.type(), orig_input.shape()};
    auto in = orig_input.flat<T>().data();
    auto dy = grad.flat<T>().data();
    auto dx = d_in.flat<T>().data();
    auto c = g.depth;
    // Like TensorFlow's CPU kernel, the argmax is recomputed from
    // orig_input: the first maximum in window order wins ties, and a NaN
    // only wins as the window's first element.
    std::vector<T> best(static_cast<size_t>(c));
    std::vector<int64_t> arg(static_cast<size_t>(c));
    int64_t current = -1;
    auto flush = [&] {
      if (current < 0)
        return;
      for (int64_t d = 0; d < c; ++d)
        dx[arg[d] * c + d] += dy[current * c + d];
    };
    for_each_window(g, [&](int64_t oi, int64_t ii, bool first) {
      const T* src = in + ii * c;
      if (first) {
        flush();
        current = oi;
        std::copy_n(src, c, best.begin());
        std::fill(arg.begin(), arg.end(), ii);
        return;
      }
      for (int64_t d = 0; d < c; ++d)
        if (src[d] > best[d]) {
          best[d] = src[d];
          arg[d] = ii;
        }
    });
    flush();
    ctx.outputs.push_back(std::move(d_in));
    return {};
  });
}

} // namespace

void register_conv_kernels(kernel_registry& registry) {
  add_kernel<conv2d_kernel, binary_contract>(registry, "Conv2D");
  add_kernel<conv2d_backprop_input_kernel,
             inputs(3).same_dtype(2, 1).type_attr("T", 1)>(
    registry, "Conv2DBackpropInput");
  add_kernel<conv2d_backprop_filter_kernel,
             inputs(3).same_dtype(2, 0).type_attr("T", 0)>(
    registry, "Conv2DBackpropFilter");
  add_kernel<max_pool_kernel, unary_contract>(registry, "MaxPool");
  add_kernel<max_pool_grad_kernel,
             inputs(3).same_dtype(1, 0).same_dtype(2, 0).type_attr("T", 0)>(
    registry, "MaxPoolGrad");
}

} // namespace actorflow::detail
