// Operator schemas: the PyTorch-style signature string each OpDef carries,
//   "max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"
// parsed once into a Schema. The Python binding builds its argument parser
// from it, and the graph printer and error messages can show it, so the
// signature of an operator is written in exactly one place.
#pragma once
#include <string>
#include <vector>

#include "ops/attrs.h"

namespace tp {

enum class ArgType : uint8_t {
  Tensor,      // an input
  TensorList,  // Tensor[]: every tensor of the list is an input
  Int,
  IntList,     // int[] or int[N] (a single int broadcasts to N)
  Float,       // stored as a Scalar
  Bool,
  Scalar,
  Str,
  ScalarType,  // a dtype
  Generator,   // stored as the generator's int64 id
  // Checked by the binding and never stored in Attrs (kernels do not see them):
  Device,        // must name the CPU
  MemoryFormat,  // applied to the result by the binding
};

struct SchemaArg {
  std::string name;
  const char* attr_name = "";  // interned; the Attrs key for non-tensor args
  ArgType type = ArgType::Tensor;
  bool optional = false;       // "T?": None is allowed (absent tensor / monostate)
  int list_len = 0;            // N of int[N]; 0 = any length
  bool kwarg_only = false;     // after "*"
  bool has_default = false;
  AttrValue default_value;     // monostate for a None default
};

struct Schema {
  std::string name;      // "max"
  std::string overload;  // "dim" (empty for the main overload)
  std::vector<SchemaArg> args;
  std::vector<std::string> returns;  // names ("" when unnamed); one per result
  bool returns_list = false;         // "-> Tensor[]": a variable number of results
  std::string text;                  // the original string, for error messages
  int num_tensor_args() const;
  bool has_tensor_list() const;
};

// Throws tp::Error naming the schema text on a syntax error (a bug in an OpDef).
Schema parse_schema(const std::string& text);

std::string arg_type_name(const SchemaArg& a);  // "int[2]?", as written in schemas

}  // namespace tp
