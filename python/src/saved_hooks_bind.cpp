// tp.autograd.graph.saved_tensors_hooks in C++: the user's pack/unpack
// functions wrapped as autograd::SavedHooks (autograd/saved_hooks.h).
#include "autograd/saved_hooks.h"
#include "common.h"
#include "core/grad_mode.h"

namespace tp::py {
namespace {

class PyPacked : public autograd::PackedSaved {
 public:
  PyPacked(nb::object value, nb::object unpack) : value_(std::move(value)), unpack_(std::move(unpack)) {}
  ~PyPacked() override {
    nb::gil_scoped_acquire gil;  // the last reference may go on a thread without the GIL
    value_.reset();
    unpack_.reset();
  }
  Tensor unpack() const override {
    nb::gil_scoped_acquire gil;
    nb::object r = unpack_(value_);
    if (!nb::isinstance<Tensor>(r))
      throw TypeError(str("saved_tensors_hooks: the unpack hook must return a Tensor, got ",
                          nb::cast<std::string>(nb::str(r.type().attr("__name__")))));
    return nb::cast<Tensor>(r);
  }

 private:
  nb::object value_, unpack_;
};

class PyHooks : public autograd::SavedHooks {
 public:
  PyHooks(nb::object pack, nb::object unpack) : pack_(std::move(pack)), unpack_(std::move(unpack)) {}
  ~PyHooks() override {
    nb::gil_scoped_acquire gil;
    pack_.reset();
    unpack_.reset();
  }
  std::shared_ptr<autograd::PackedSaved> pack(const Tensor& t) override {
    nb::gil_scoped_acquire gil;
    // What the hook computes is not part of any graph (PyTorch's pack hooks
    // run outside autograd's recording too).
    AutoGradMode no_grad(false);
    return std::make_shared<PyPacked>(pack_(t), unpack_);
  }

 private:
  nb::object pack_, unpack_;
};

}  // namespace

void bind_saved_hooks(nb::module_& m) {
  m.def("_push_saved_tensors_hooks", [](nb::object pack, nb::object unpack) {
    autograd::push_saved_hooks(std::make_shared<PyHooks>(std::move(pack), std::move(unpack)));
  });
  m.def("_pop_saved_tensors_hooks", [] { autograd::pop_saved_hooks(); });
}

}  // namespace tp::py
