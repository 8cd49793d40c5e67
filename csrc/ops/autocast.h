// Automatic mixed precision (tp.autocast): a thread-local state per device type
// (enabled + the lower-precision dtype) read by the dispatcher. An operator with
// a policy for its device type gets its floating inputs cast by ordinary `to`
// calls before it runs, so the tracer records the casts in the graph and
// autograd differentiates them (the gradient of a cast casts back): C++ and
// Python callers, eager and captured code, see one behaviour. Casting in Python
// instead would be invisible to tp.compile (ARCHITECTURE.md, "Decisions").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "ops/attrs.h"

namespace tp {
struct OpDef;

// PyTorch's op categories (the lists are per device type, as PyTorch's: its CPU
// lists are shorter than its CUDA ones).
enum class AutocastPolicy : uint8_t {
  None = 0,            // runs in its inputs' dtypes
  LowerPrecision = 1,  // floating inputs cast to the autocast dtype (matmul, conv, linear, ...)
  Float32 = 2,         // floating inputs cast to float32 (losses, exp/log on CUDA, ...)
  Promote = 3,         // floating inputs cast to the widest of them (cat, stack, addcmul, ...)
  // Not cast, and its parts are not either: a composite here that is one
  // operator in PyTorch (dot, outer), whose decomposition would otherwise reach
  // a listed matmul and come back in 16 bits where PyTorch's runs in float32.
  Opaque = 4,
};

bool autocast_enabled(Device::Kind kind);
void set_autocast_enabled(Device::Kind kind, bool enabled);
DType autocast_dtype(Device::Kind kind);
void set_autocast_dtype(Device::Kind kind, DType dtype);  // float16 or bfloat16, else ValueError
bool autocast_cache_enabled();
void set_autocast_cache_enabled(bool enabled);
// Entering / leaving an autocast region (the Python context manager): the cast
// cache lives until the outermost region ends, as PyTorch's.
int autocast_increment_nesting();
int autocast_decrement_nesting();
void clear_autocast_cache();

// Some device type has autocast on and no AutocastSuspend is active: the
// dispatcher's only check when autocast is off (one thread-local read).
bool autocast_active();

// While alive, the dispatcher casts nothing on this thread: inside an operator
// autocast already cast for (its decomposition must not cast again, as
// PyTorch's autocast key is excluded below a listed op), during backward (the
// formulas run in the dtypes the forward chose), and while a compiled
// function runs its graph (the casts are in the graph already).
class AutocastSuspend {
 public:
  AutocastSuspend();
  ~AutocastSuspend();
  AutocastSuspend(const AutocastSuspend&) = delete;
  AutocastSuspend& operator=(const AutocastSuspend&) = delete;
};

// The same as a pair of calls, for a Python context manager.
void autocast_push_suspend();
void autocast_pop_suspend();
// Sets the suspension depth and returns the old one: a recomputation inside a
// backward pass (activation checkpointing) runs under the forward's autocast
// state although the engine suspended autocast around it.
int autocast_swap_suspended(int depth);

// The autocast part of a compiled function's specialization key: the enabled
// device types and their dtypes (0 when autocast is off or suspended).
uint32_t autocast_state_code();
std::string autocast_state_describe();  // "autocast: cpu bfloat16" or ""

// The policy of an operator (or of a composite written in Python, by name) for
// a device type.
AutocastPolicy autocast_policy(const std::string& name, Device::Kind kind);
// The device type whose autocast state applies to an operator's inputs: CUDA
// when any input is a CUDA tensor.
Device::Kind autocast_device_of(const std::vector<Tensor>& inputs);
// The inputs cast as the policy asks (through the dispatcher: recorded).
std::vector<Tensor> autocast_cast_inputs(AutocastPolicy policy, Device::Kind kind, const std::vector<Tensor>& inputs);
// The dispatcher's entry for an operator called while autocast_active():
// casts per the operator's policy, then runs it with autocast suspended. Sets
// *handled = false (and does nothing) when the operator has no policy for the
// inputs' device type or that device type's autocast is off.
std::vector<Tensor> autocast_call(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                                  bool* handled);

// Registers the per-device policies on the OpDefs (run while the builtin
// operators register).
void declare_autocast_policies();

}  // namespace tp
