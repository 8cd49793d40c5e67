// The dispatcher's device rule (PyTorch's): one operator's tensors live on one
// device; a 0-d CPU tensor beside CUDA ones is a number; copy_'s source may be
// anywhere. Runs without a GPU: "CUDA" tensors here are host memory labelled
// with a CUDA device, which only the device check reads (no CUDA hook is
// installed in this test, so a call that passes the check ends in
// NotImplementedError "no kernel").
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ops/dispatch.h"
#include "ops/registry.h"

namespace tp {
namespace {

Tensor labelled(Shape sizes, Device device, DType dtype = DType::Float32) {
  auto impl = std::make_shared<TensorImpl>();
  const size_t n = static_cast<size_t>(numel(sizes)) * 8;
  auto* mem = new double[n / 8 + 1]();
  impl->storage = StorageImpl::wrap(mem, n, [mem] { delete[] mem; }, device);
  impl->sizes = sizes;
  impl->strides = contiguous_strides(sizes);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Device gpu(int index) { return Device{Device::Kind::CUDA, static_cast<int16_t>(index)}; }

std::string error_of(const char* op, const std::vector<Tensor>& in) {
  try {
    run_kernel(get_op(op), in, {});
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(DeviceCheck, TwoGpusRaiseNamingTheOperatorAndBothDevices) {
  const std::string e = error_of("add", {labelled({2, 3}, gpu(0)), labelled({2, 3}, gpu(1))});
  EXPECT_NE(e.find("add: Expected all tensors to be on the same device"), std::string::npos) << e;
  EXPECT_NE(e.find("cuda:0 and cuda:1"), std::string::npos) << e;
  const std::string m = error_of("mm", {labelled({2, 3}, gpu(1)), labelled({3, 2}, gpu(0))});
  EXPECT_NE(m.find("mm: Expected all tensors to be on the same device"), std::string::npos) << m;
  EXPECT_NE(m.find("cuda:1 and cuda:0"), std::string::npos) << m;
}

TEST(DeviceCheck, CpuTensorWithDimsBesideAGpuTensorRaises) {
  const std::string e = error_of("mul", {labelled({4}, gpu(1)), labelled({4}, Device::cpu())});
  EXPECT_NE(e.find("mul: Expected all tensors to be on the same device"), std::string::npos) << e;
  EXPECT_NE(e.find("cuda:1 and cpu"), std::string::npos) << e;
  // The CPU operand first: still named with the GPU one.
  const std::string f = error_of("mul", {labelled({4}, Device::cpu()), labelled({4}, gpu(0))});
  EXPECT_NE(f.find("cuda:0 and cpu"), std::string::npos) << f;
}

TEST(DeviceCheck, ZeroDimCpuTensorAndCopySourcePass) {
  // Past the device check, to the (absent) CUDA kernel.
  const std::string e = error_of("mul", {labelled({4}, gpu(1)), Tensor::scalar_tensor(Scalar(2.0), DType::Float32)});
  EXPECT_EQ(e.find("same device"), std::string::npos) << e;
  EXPECT_NE(e.find("no kernel for device 'cuda:1'"), std::string::npos) << e;
  const std::string c = error_of("copy_", {labelled({4}, gpu(1)), labelled({4}, gpu(0))});
  EXPECT_EQ(c.find("same device"), std::string::npos) << c;
  const std::string d = error_of("copy_", {labelled({4}, gpu(0)), labelled({4}, Device::cpu())});
  EXPECT_EQ(d.find("same device"), std::string::npos) << d;
}

TEST(DeviceCheck, HostIndexTensorsOfAdvancedIndexingPass) {
  // x[i] / x[i] = v on a GPU tensor take host integer or bool indices (the
  // CUDA kernel uploads them), as PyTorch; a host float operand still raises.
  const std::string e = error_of("index", {labelled({4, 3}, gpu(0)), labelled({2}, Device::cpu(), DType::Int64)});
  EXPECT_EQ(e.find("same device"), std::string::npos) << e;
  const std::string b = error_of("index", {labelled({4, 3}, gpu(0)), labelled({4}, Device::cpu(), DType::Bool)});
  EXPECT_EQ(b.find("same device"), std::string::npos) << b;
  const std::string v = error_of("index_put", {labelled({4, 3}, gpu(0)), labelled({2}, Device::cpu(), DType::Int64),
                                               labelled({2, 3}, Device::cpu())});
  EXPECT_NE(v.find("index_put: Expected all tensors to be on the same device"), std::string::npos) << v;
}

}  // namespace
}  // namespace tp
