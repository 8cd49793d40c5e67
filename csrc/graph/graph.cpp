#include "graph/graph.h"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace tp::graph {

const char* opcode_name(Opcode op) {
  switch (op) {
    case Opcode::Placeholder: return "placeholder";
    case Opcode::GetAttr: return "get_attr";
    case Opcode::CallFunction: return "call_function";
    case Opcode::CallMethod: return "call_method";
    case Opcode::CallModule: return "call_module";
    case Opcode::Output: return "output";
  }
  return "?";
}

std::vector<Node*> Node::input_nodes() const {
  std::vector<Node*> out;
  for (auto& a : args)
    if (auto* n = std::get_if<Node*>(&a); n && *n) out.push_back(*n);
  return out;
}

const OpDef& getitem_op() {
  static const OpDef op{.name = "getitem", .num_inputs = 1};
  return op;
}

bool Node::is_getitem() const { return opcode == Opcode::CallFunction && target == &getitem_op(); }

bool Node::is_op(const char* op_name) const {
  return opcode == Opcode::CallFunction && target && std::string_view(target->name) == op_name;
}

std::string Graph::unique_name(const std::string& hint) {
  std::string base;
  for (char c : hint) base += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (base.empty() || std::isdigit(static_cast<unsigned char>(base[0]))) base = "v" + base;
  static const std::unordered_set<std::string> reserved = {"sum", "abs", "max", "min", "pow", "input", "def",
                                                           "return", "tp", "and", "or", "not", "in", "is"};
  std::string name = reserved.count(base) ? base + "_1" : base;
  for (int i = 1; used_names_.count(name); ++i) name = base + "_" + std::to_string(i);
  used_names_.insert(name);
  return name;
}

void Graph::rename(Node* n, const std::string& hint) {
  used_names_.erase(n->name);
  n->name = unique_name(hint);
}

Node* Graph::add(std::unique_ptr<Node> n, Node* before) {
  Node* raw = n.get();
  for (Node* in : raw->input_nodes()) in->users.push_back(raw);
  if (before) {
    auto it = std::find_if(nodes_.begin(), nodes_.end(), [&](auto& p) { return p.get() == before; });
    nodes_.insert(it, std::move(n));
  } else {
    nodes_.push_back(std::move(n));
  }
  return raw;
}

Node* Graph::placeholder(const std::string& hint, const TensorMeta& meta, int input_index) {
  auto n = std::make_unique<Node>();
  n->opcode = Opcode::Placeholder;
  n->name = unique_name(hint);
  n->meta = meta;
  n->input_index = input_index;
  // Placeholders stay ahead of every other node.
  auto it = std::find_if(nodes_.begin(), nodes_.end(), [](auto& p) { return p->opcode != Opcode::Placeholder; });
  Node* before = it == nodes_.end() ? nullptr : it->get();
  return add(std::move(n), before);
}

Node* Graph::get_attr(const std::string& hint, const Tensor& value, Node* before) {
  auto n = std::make_unique<Node>();
  n->opcode = Opcode::GetAttr;
  n->name = unique_name(hint);
  n->meta = value.meta();
  n->constant = value;
  return add(std::move(n), before);
}

Node* Graph::call(const OpDef& op, std::vector<Arg> args, Attrs attrs, const TensorMeta& meta) {
  return insert_call_before(nullptr, op, std::move(args), std::move(attrs), meta);  // nullptr: append
}

Node* Graph::insert_call_before(Node* before, const OpDef& op, std::vector<Arg> args, Attrs attrs,
                                const TensorMeta& meta) {
  auto n = std::make_unique<Node>();
  n->opcode = Opcode::CallFunction;
  n->name = unique_name(op.name);
  n->target = &op;
  n->args = std::move(args);
  n->attrs = std::move(attrs);
  n->meta = meta;
  return add(std::move(n), before);
}

Node* Graph::output(std::vector<Arg> values) {
  auto n = std::make_unique<Node>();
  n->opcode = Opcode::Output;
  n->name = "output";
  n->args = std::move(values);
  return add(std::move(n));
}

std::vector<Node*> Graph::placeholders() const {
  std::vector<Node*> out;
  for (auto& n : nodes_)
    if (n->opcode == Opcode::Placeholder) out.push_back(n.get());
  std::sort(out.begin(), out.end(), [](Node* a, Node* b) { return a->input_index < b->input_index; });
  return out;
}

Node* Graph::output_node() const {
  for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it)
    if ((*it)->opcode == Opcode::Output) return it->get();
  return nullptr;
}

void Graph::replace_all_uses(Node* from, Node* to) {
  for (Node* u : from->users) {
    for (auto& a : u->args)
      if (auto* p = std::get_if<Node*>(&a); p && *p == from) *p = to;
    to->users.push_back(u);
  }
  from->users.clear();
}

void Graph::erase(Node* n) {
  TP_CHECK(n->users.empty(), Error, "internal: erasing graph node ", n->name, " which still has users");
  for (Node* in : n->input_nodes()) {
    auto& us = in->users;
    us.erase(std::remove(us.begin(), us.end(), n), us.end());
  }
  nodes_.erase(std::find_if(nodes_.begin(), nodes_.end(), [&](auto& p) { return p.get() == n; }));
}

void Graph::recompute_users() {
  for (auto& n : nodes_) n->users.clear();
  for (auto& n : nodes_)
    for (Node* in : n->input_nodes()) in->users.push_back(n.get());
}

static std::string arg_str(const Arg& a) {
  if (auto* n = std::get_if<Node*>(&a)) return *n ? (*n)->name : "None";
  return std::get<Scalar>(a).repr();
}

namespace {
// The Python spelling of an operator call, so printed code runs: an overload
// (`max.dim`) is called by its base name (the binding picks the overload from
// the arguments), and an operator without a schema is bound as a Tensor
// method only (`to`), so it is called through the class.
std::string callable_name(const OpDef* op) {
  if (!op) return "tp.?";
  std::string name = op->name;
  if (auto dot = name.find('.'); dot != std::string::npos) name.resize(dot);
  return (op->schema && *op->schema ? "tp." : "tp.Tensor.") + name;
}
}  // namespace

// A shape for the printer: symbolic dims as expressions ("[s0, 2048]").
static std::string sym_shape_str(const Node& n, const Shape& sizes, const SymShape& sym) {
  if (sym.size() != sizes.size()) return shape_str(sizes);
  std::string s = "[";
  for (size_t i = 0; i < sym.size(); ++i) {
    if (i) s += ", ";
    s += sym[i].to_string();
  }
  (void)n;
  return s + "]";
}

std::string Graph::code() const {
  std::ostringstream os;
  if (is_symbolic()) {
    os << "# symbols:";
    for (size_t k = 0; k < symbols.size(); ++k)
      os << " s" << k << "=" << symbols[k].origin << " (hint " << symbols[k].hint << ")";
    os << "\n";
  }
  os << "def forward(";
  bool first = true;
  for (Node* p : placeholders()) {
    os << (first ? "" : ", ") << p->name;
    first = false;
  }
  os << "):\n";
  for (auto& n : nodes_) {
    switch (n->opcode) {
      case Opcode::Placeholder: break;
      case Opcode::GetAttr:
        os << "    " << n->name << " = self." << n->name << "  # constant " << dtype_name(n->meta.dtype)
           << shape_str(n->meta.sizes) << "\n";
        break;
      case Opcode::CallFunction:
      case Opcode::CallMethod:
      case Opcode::CallModule: {
        if (n->is_getitem()) {
          os << "    " << n->name << " = " << arg_str(n->args.at(0)) << "[" << n->getitem_index() << "]  # "
             << dtype_name(n->meta.dtype) << sym_shape_str(*n, n->meta.sizes, n->sym_sizes) << "\n";
          break;
        }
        os << "    " << n->name << " = " << callable_name(n->target) << "(";
        bool f = true;
        for (auto& a : n->args) { os << (f ? "" : ", ") << arg_str(a); f = false; }
        for (auto& [k, v] : n->attrs.items()) {
          os << (f ? "" : ", ") << k << "=";
          f = false;
          auto sa = n->sym_attrs.find(k);
          if (sa == n->sym_attrs.end()) {
            os << attr_repr(v);
          } else if (std::holds_alternative<int64_t>(v) && sa->second.size() == 1) {
            os << sa->second[0].to_string();
          } else {
            os << "[";
            for (size_t i = 0; i < sa->second.size(); ++i) os << (i ? ", " : "") << sa->second[i].to_string();
            os << "]";
          }
        }
        os << ")  # " << dtype_name(n->meta.dtype) << sym_shape_str(*n, n->meta.sizes, n->sym_sizes) << "\n";
        break;
      }
      case Opcode::Output: {
        os << "    return ";
        if (n->args.size() == 1) {
          os << arg_str(n->args[0]);
        } else {
          os << "(";
          for (size_t i = 0; i < n->args.size(); ++i) os << (i ? ", " : "") << arg_str(n->args[i]);
          os << (n->args.size() == 1 ? ",)" : ")");
        }
        os << "\n";
        break;
      }
    }
  }
  return os.str();
}

void Graph::lint() const {
  std::unordered_set<const Node*> defined;
  for (auto& n : nodes_) {
    for (Node* in : n->input_nodes())
      TP_CHECK(defined.count(in), Error, "graph lint: ", n->name, " uses ", in->name, " before it is defined");
    for (Node* u : n->users) {
      auto ins = u->input_nodes();
      TP_CHECK(std::find(ins.begin(), ins.end(), n.get()) != ins.end(), Error, "graph lint: stale user ", u->name,
               " of ", n->name);
    }
    defined.insert(n.get());
  }
}

std::unique_ptr<Graph> Graph::clone() const {
  auto g = std::make_unique<Graph>();
  std::unordered_map<const Node*, Node*> map;
  for (auto& n : nodes_) {
    auto c = std::make_unique<Node>(*n);
    c->users.clear();
    for (auto& a : c->args)
      if (auto* p = std::get_if<Node*>(&a); p && *p) *p = map.at(*p);
    if (c->grad_identity_of) c->grad_identity_of = map.at(c->grad_identity_of);  // a placeholder: cloned before
    map[n.get()] = c.get();
    g->nodes_.push_back(std::move(c));
  }
  g->used_names_ = used_names_;
  g->symbols = symbols;
  g->recompute_users();
  return g;
}

Node* copy_node(Graph& dst, const Node* n, std::unordered_map<const Node*, Node*>& m) {
  if (n->opcode == Opcode::GetAttr) return m[n] = dst.get_attr(n->name, n->constant);
  std::vector<Arg> args;
  for (auto& a : n->args) {
    if (auto* p = std::get_if<Node*>(&a)) {
      args.push_back(*p ? m.at(*p) : static_cast<Node*>(nullptr));
    } else {
      args.push_back(a);
    }
  }
  Node* c = dst.call(*n->target, std::move(args), n->attrs, n->meta);
  c->output_metas = n->output_metas;
  c->grad_enabled = n->grad_enabled;
  // Dynamic shapes: the source graph's symbolic data (one numbering for all parts).
  c->sym_sizes = n->sym_sizes;
  c->output_sym_sizes = n->output_sym_sizes;
  c->sym_attrs = n->sym_attrs;
  return m[n] = c;
}

bool has_device_moves(const Graph& g) {
  for (const auto& n : g.nodes())
    if (n->opcode == Opcode::CallFunction && n->target && n->target->has(kDeviceMove)) return true;
  return false;
}

}  // namespace tp::graph
