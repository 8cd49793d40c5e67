// CUDA paths that run the CPU kernel on host copies (see gap_kernels.h):
// bincount, histc, histogram, mode, cummax / cummin, multinomial and bernoulli(p),
// the tp.linalg primitives (qr, cholesky, eigh, svd, solve, slogdet, lstsq, the LU
// factorization and its pivots' permutation), _value_check's flag, and the
// tp.special functions of ops/special_bessel_ops.cpp and special_binary_ops.cpp
// (until they get NVRTC kernels like special_kernels.cpp's; their results are
// the CPU's bit for bit).
//
// Why on the host: the counting operators read their data to size the result
// (bincount) or need a data-dependent range first (histc, histogram), so PyTorch
// synchronizes for them as well; mode sorts every slice; and the random ones
// draw from TensorPlay's counter-based generator exactly as the CPU does, so one
// seed gives the same samples on both devices (as normal_/uniform_ on CUDA do);
// cummax / cummin are one sequential pass per slice; the factorizations run
// through the LAPACK the CPU kernels use (the composites above them, their
// derivative formulas and compiled regions stay on the device), so CUDA
// results equal the CPU's and singular matrices raise the same LinAlgError.
// The cost is one device-to-host copy of the inputs and one upload of the
// results; a CUDA graph capture refuses them (check_not_capturing).
#include <string_view>

#include "cuda/copy.h"
#include "cuda/gap_kernels.h"
#include "cuda/stream.h"
#include "ops/dispatch.h"

namespace tp::cuda {

bool host_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                 const std::vector<TensorMeta>&, std::vector<Tensor>& out) {
  static constexpr std::string_view kOps[] = {"bincount", "histc", "histogram.bins_tensor", "histogram.bin_ct",
                                              "mode", "cummax", "cummin", "multinomial", "bernoulli",
                                              "linalg_qr", "linalg_cholesky", "linalg_eigh", "linalg_svd",
                                              "linalg_solve", "linalg_slogdet", "linalg_lstsq",
                                              "linalg_lu_factor_ex", "linalg_lu_pivots_to_permutation",
                                              // tp.special functions with no CUDA kernel yet (their CPU
                                              // algorithms in ops/special_bessel_ops.cpp, special_binary_ops.cpp)
                                              "special_bessel_j0", "special_bessel_j1", "special_bessel_y0",
                                              "special_bessel_y1", "special_modified_bessel_k0",
                                              "special_modified_bessel_k1", "special_scaled_modified_bessel_k0",
                                              "special_scaled_modified_bessel_k1", "special_spherical_bessel_j0",
                                              "special_airy_ai", "special_i0e", "special_i1e", "special_erfcx",
                                              "special_log_ndtr", "special_ndtri", "special_zeta", "special_gammainc",
                                              "special_gammaincc", "special_chebyshev_polynomial_t",
                                              "special_chebyshev_polynomial_u", "special_chebyshev_polynomial_v",
                                              "special_chebyshev_polynomial_w",
                                              "special_shifted_chebyshev_polynomial_t",
                                              "special_shifted_chebyshev_polynomial_u",
                                              "special_shifted_chebyshev_polynomial_v",
                                              "special_shifted_chebyshev_polynomial_w",
                                              "special_hermite_polynomial_h", "special_hermite_polynomial_he",
                                              "special_laguerre_polynomial_l", "special_legendre_polynomial_p"};
  if (op.name == std::string_view("_value_check") && inputs[0].device().kind == Device::Kind::CUDA) {
    // A data check (ops/value_check_ops.cpp): only the 0-d flag comes back (one
    // synchronization, as the CPU reads it); self is cloned on the device. It is
    // also the extern form in a CUDA region, whose printer has no status word.
    check_not_capturing("a data check on CUDA (its flag is read back)");
    if (to_cpu(inputs[0]).item().to<bool>()) throw ValueError(attrs.get_str("message"));
    out = {run_kernel(get_op("clone"), {inputs[1]}, {})[0]};
    return true;
  }
  bool listed = false;
  for (std::string_view n : kOps) listed = listed || n == op.name;
  if (!listed) return false;
  int dev = -1;
  for (const Tensor& t : inputs)
    if (t.defined() && t.device().kind == Device::Kind::CUDA) {
      TP_CHECK(dev < 0 || dev == t.device().index, ValueError, op.name,
               ": expected all tensors on one device, got cuda:", dev, " and cuda:", t.device().index);
      dev = t.device().index;
    }
  if (dev < 0) return false;
  check_not_capturing(str(op.name, " on CUDA (it runs on the host)").c_str());
  std::vector<Tensor> host;
  for (const Tensor& t : inputs)
    host.push_back(t.defined() && t.device().kind == Device::Kind::CUDA ? to_cpu(t) : t);
  out.clear();
  for (const Tensor& r : run_kernel(op, host, attrs)) out.push_back(to_device(r, dev));
  return true;
}

}  // namespace tp::cuda
