// The PyTorch peer's fair GEMM (docs/PERFORMANCE.md, "The PyTorch peer"):
// BLAS's sgemm_ served by Eigen, for LD_PRELOAD into Debian's PyTorch.
// Debian's libtorch calls the reference BLAS's sgemm_ (libblas.so.3),
// several times slower than the Eigen GEMM actorflow's MatMul runs, so a
// comparison with stock PyTorch measures the BLAS more than either
// runtime. Preloaded, both sides multiply with the same code (one thread).
//
// The Fortran BLAS interface: column-major, every argument by pointer,
// C = alpha * op(A) * op(B) + beta * C with op(X) = X or X^T. Complex
// transposes ('C') are plain transposes for real matrices. A bad
// argument is named on stderr by its number, as BLAS's xerbla does, and
// the call returns changing nothing (as OpenBLAS; the reference xerbla
// also stops the program); sizes of 0 return at once. Only sgemm_ is
// exported: the Eigen code inside stays this library's own.

#include <algorithm>
#include <cstdio>

#include <Eigen/Core>

namespace {

using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic>;
using const_map = Eigen::Map<const matrix, 0, Eigen::OuterStride<>>;
using map = Eigen::Map<matrix, 0, Eigen::OuterStride<>>;

bool transposed(char t) {
  return t == 'T' || t == 't' || t == 'C' || t == 'c';
}

bool valid_trans(char t) {
  return transposed(t) || t == 'N' || t == 'n';
}

void bad_argument(int which) {
  std::fprintf(stderr, " ** On entry to SGEMM  parameter number %2d had an "
                       "illegal value\n", which);
}

} // namespace

extern "C" __attribute__((visibility("default"))) void sgemm_(const char* transa, const char* transb, const int* m,
                       const int* n, const int* k, const float* alpha,
                       const float* a, const int* lda, const float* b,
                       const int* ldb, const float* beta, float* c,
                       const int* ldc) {
  const bool ta = transposed(*transa);
  const bool tb = transposed(*transb);
  const int a_rows = ta ? *k : *m;
  const int b_rows = tb ? *n : *k;
  if (!valid_trans(*transa)) {
    bad_argument(1);
    return;
  }
  if (!valid_trans(*transb)) {
    bad_argument(2);
    return;
  }
  if (*m < 0 || *n < 0 || *k < 0) {
    bad_argument(*m < 0 ? 3 : *n < 0 ? 4 : 5);
    return;
  }
  if (*lda < std::max(1, a_rows) || *ldb < std::max(1, b_rows)
      || *ldc < std::max(1, *m)) {
    bad_argument(*lda < std::max(1, a_rows) ? 8
                 : *ldb < std::max(1, b_rows) ? 10
                                              : 13);
    return;
  }
  if (*m == 0 || *n == 0)
    return;
  map out{c, *m, *n, Eigen::OuterStride<>{*ldc}};
  // beta == 0: C is not read (it may hold NaNs), as BLAS says.
  if (*beta == 0.0f)
    out.setZero();
  else if (*beta != 1.0f)
    out *= *beta;
  if (*k == 0 || *alpha == 0.0f)
    return;
  const_map am{a, a_rows, ta ? *m : *k, Eigen::OuterStride<>{*lda}};
  const_map bm{b, b_rows, tb ? *k : *n, Eigen::OuterStride<>{*ldb}};
  if (ta && tb)
    out.noalias() += *alpha * (am.transpose() * bm.transpose());
  else if (ta)
    out.noalias() += *alpha * (am.transpose() * bm);
  else if (tb)
    out.noalias() += *alpha * (am * bm.transpose());
  else
    out.noalias() += *alpha * (am * bm);
}
