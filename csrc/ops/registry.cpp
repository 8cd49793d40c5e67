#include "ops/registry.h"

#include "ops/families.h"
#include "ops/schema.h"

#include <deque>
#include <mutex>
#include <unordered_map>

namespace tp {
namespace {
struct Registry {
  std::deque<OpDef> defs;  // deque: stable addresses
  std::unordered_map<std::string, const OpDef*> by_name;
  std::unordered_map<const OpDef*, Schema> schemas;
};
Registry& registry() {
  static Registry r;
  return r;
}
// Registration is explicit (not static initializers): objects of a static
// library that nothing references would be dropped by the linker.
void ensure_registered() {
  static std::once_flag once;
  std::call_once(once, register_builtin_ops);
}
}  // namespace

const OpDef& register_op(OpDef def) {
  auto& r = registry();
  TP_CHECK(!r.by_name.count(def.name), Error, "operator registered twice: ", def.name);
  r.defs.push_back(def);
  const OpDef* op = &r.defs.back();
  r.by_name[def.name] = op;
  if (def.schema && *def.schema) {
    Schema s = parse_schema(def.schema);
    const std::string full = s.overload.empty() ? s.name : s.name + "." + s.overload;
    TP_CHECK(full == def.name, Error, "internal: schema '", def.schema, "' does not name operator ", def.name);
    const int expected = s.has_tensor_list() ? -1 : s.num_tensor_args();
    TP_CHECK(def.num_inputs == expected, Error, "internal: operator ", def.name, " declares ", def.num_inputs,
             " tensor inputs but its schema has ", expected);
    r.schemas.emplace(op, std::move(s));
  }
  return *op;
}

void declare_saved(const char* name, SavedFn fn) {
  auto& r = registry();  // no ensure_registered: this runs inside it
  auto it = r.by_name.find(name);
  TP_CHECK(it != r.by_name.end(), Error, "internal: saved-values declaration for unknown operator '", name, "'");
  const_cast<OpDef*>(it->second)->saved = fn;  // the deque owns the OpDef; by_name only points to it
}

void declare_autocast(const char* name, int device_kind, uint8_t policy) {
  auto& r = registry();  // no ensure_registered: this runs inside it
  auto it = r.by_name.find(name);
  TP_CHECK(it != r.by_name.end(), Error, "internal: autocast policy for unknown operator '", name, "'");
  TP_CHECK(device_kind == 0 || device_kind == 1, Error, "internal: autocast device kind ", device_kind);
  const_cast<OpDef*>(it->second)->autocast[device_kind] = policy;
}

const OpDef* find_op(const std::string& name) {
  ensure_registered();
  auto& r = registry();
  auto it = r.by_name.find(name);
  return it == r.by_name.end() ? nullptr : it->second;
}

const OpDef& get_op(const char* name) { return get_op(std::string(name)); }

const OpDef& get_op(const std::string& name) {
  const OpDef* op = find_op(name);
  TP_CHECK(op, Error, "unknown operator '", name, "'");
  return *op;
}

const Schema* op_schema(const OpDef& op) {
  ensure_registered();
  auto& m = registry().schemas;
  auto it = m.find(&op);
  return it == m.end() ? nullptr : &it->second;
}

std::vector<const OpDef*> all_ops() {
  ensure_registered();
  std::vector<const OpDef*> out;
  for (auto& d : registry().defs) out.push_back(&d);
  return out;
}

}  // namespace tp
