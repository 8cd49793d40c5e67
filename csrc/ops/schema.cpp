#include "ops/schema.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace tp {
namespace {

// A small recursive-descent reader over the schema text.
class Reader {
 public:
  explicit Reader(const std::string& s) : s_(s) {}
  void skip_ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool eat(char c) {
    skip_ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool eat(const char* word) {
    skip_ws();
    const std::string w(word);
    if (s_.compare(i_, w.size(), w) == 0) {
      i_ += w.size();
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(str("expected '", c, "'"));
  }
  std::string ident() {
    skip_ws();
    size_t b = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_' || s_[i_] == '.')) ++i_;
    if (b == i_) fail("expected a name");
    return s_.substr(b, i_ - b);
  }
  // Everything up to the next top-level ',' or ')' (a default value).
  std::string until_separator() {
    skip_ws();
    size_t b = i_;
    int depth = 0;
    char quote = 0;
    for (; i_ < s_.size(); ++i_) {
      char c = s_[i_];
      if (quote) {
        if (c == quote) quote = 0;
      } else if (c == '\'' || c == '"') {
        quote = c;
      } else if (c == '[' || c == '(') {
        depth++;
      } else if (c == ']' || (c == ')' && depth > 0)) {
        depth--;
      } else if (depth == 0 && (c == ',' || c == ')')) {
        break;
      }
    }
    size_t e = i_;
    while (e > b && std::isspace(static_cast<unsigned char>(s_[e - 1]))) --e;
    return s_.substr(b, e - b);
  }
  bool at_ident() {
    skip_ws();
    return i_ < s_.size() && (std::isalpha(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_');
  }
  bool done() {
    skip_ws();
    return i_ == s_.size();
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw Error(str("internal: bad operator schema '", s_, "' at column ", i_, ": ", why));
  }

 private:
  const std::string& s_;
  size_t i_ = 0;
};

ArgType type_from_name(const std::string& t, const Reader& r) {
  if (t == "Tensor") return ArgType::Tensor;
  if (t == "int" || t == "SymInt") return ArgType::Int;
  if (t == "float") return ArgType::Float;
  if (t == "bool") return ArgType::Bool;
  if (t == "Scalar") return ArgType::Scalar;
  if (t == "str") return ArgType::Str;
  if (t == "ScalarType") return ArgType::ScalarType;
  if (t == "Generator") return ArgType::Generator;
  if (t == "Device") return ArgType::Device;
  if (t == "MemoryFormat") return ArgType::MemoryFormat;
  r.fail("unknown type '" + t + "'");
}

Scalar number_literal(const std::string& v, const Reader& r) {
  if (v == "inf") return Scalar(std::numeric_limits<double>::infinity());
  if (v == "-inf") return Scalar(-std::numeric_limits<double>::infinity());
  char* end = nullptr;
  if (v.find_first_of(".eE") == std::string::npos || v.rfind("0x", 0) == 0) {
    long long x = std::strtoll(v.c_str(), &end, 0);
    if (end && *end == '\0') return Scalar(static_cast<int64_t>(x));
  }
  double d = std::strtod(v.c_str(), &end);
  if (!end || *end != '\0') r.fail("bad number '" + v + "'");
  return Scalar(d);
}

AttrValue default_literal(const SchemaArg& a, const std::string& v, const Reader& r) {
  if (v == "None") {
    if (!a.optional) r.fail("None default for a non-optional argument '" + a.name + "'");
    return std::monostate{};
  }
  switch (a.type) {
    case ArgType::Bool:
      if (v == "True") return true;
      if (v == "False") return false;
      r.fail("bad bool default '" + v + "'");
    case ArgType::Int:
      return number_literal(v, r).to_int();
    case ArgType::Float:
      return Scalar(number_literal(v, r).to_double());
    case ArgType::Scalar:
      if (v == "True" || v == "False") return Scalar(v == "True");
      return number_literal(v, r);
    case ArgType::Str:
      if (v.size() < 2 || (v[0] != '\'' && v[0] != '"')) r.fail("bad string default " + v);
      return v.substr(1, v.size() - 2);
    case ArgType::IntList: {
      std::vector<int64_t> xs;
      if (!v.empty() && v[0] == '[') {
        std::string body = v.substr(1, v.size() - 2);
        size_t p = 0;
        while (p < body.size()) {
          size_t q = body.find(',', p);
          if (q == std::string::npos) q = body.size();
          std::string item = body.substr(p, q - p);
          if (item.find_first_not_of(' ') != std::string::npos) xs.push_back(number_literal(item.substr(item.find_first_not_of(' ')), r).to_int());
          p = q + 1;
        }
      } else {  // a single int broadcasts to every element of int[N]
        xs.assign(a.list_len > 0 ? a.list_len : 1, number_literal(v, r).to_int());
      }
      return xs;
    }
    default:
      r.fail("argument '" + a.name + "' of this type cannot have a default other than None");
  }
}

SchemaArg parse_arg(Reader& r, bool kwarg_only) {
  SchemaArg a;
  const std::string t = r.ident();
  a.type = type_from_name(t, r);
  if (r.eat('(')) {  // alias annotation "Tensor(a!)": informative only
    while (!r.eat(')')) r.until_separator(), r.eat(',');
  }
  if (r.eat('[')) {
    if (a.type == ArgType::Tensor) a.type = ArgType::TensorList;
    else if (a.type == ArgType::Int) a.type = ArgType::IntList;
    else r.fail("only Tensor[] and int[] lists are supported");
    if (!r.eat(']')) {
      a.list_len = static_cast<int>(number_literal(r.ident(), r).to_int());
      r.expect(']');
    }
  }
  if (r.eat('?')) a.optional = true;
  a.name = r.ident();
  a.attr_name = intern_attr_name(a.name);
  a.kwarg_only = kwarg_only;
  if (r.eat('=')) {
    a.has_default = true;
    const std::string v = r.until_separator();
    if (a.type == ArgType::Tensor || a.type == ArgType::TensorList) {
      if (v != "None" || !a.optional) r.fail("tensor arguments can only default to None");
    } else {
      a.default_value = default_literal(a, v, r);
    }
  }
  return a;
}

}  // namespace

int Schema::num_tensor_args() const {
  int n = 0;
  for (auto& a : args) n += a.type == ArgType::Tensor;
  return n;
}

bool Schema::has_tensor_list() const {
  for (auto& a : args)
    if (a.type == ArgType::TensorList) return true;
  return false;
}

Schema parse_schema(const std::string& text) {
  Schema s;
  s.text = text;
  Reader r(text);
  const std::string full = r.ident();
  const size_t dot = full.find('.');
  s.name = full.substr(0, dot);
  if (dot != std::string::npos) s.overload = full.substr(dot + 1);
  r.expect('(');
  bool kwarg_only = false;
  if (!r.eat(')')) {
    do {
      if (r.eat('*')) {
        kwarg_only = true;
        continue;
      }
      s.args.push_back(parse_arg(r, kwarg_only));
    } while (r.eat(','));
    r.expect(')');
  }
  if (!r.eat("->")) r.fail("expected '->'");
  auto one_return = [&] {
    if (r.ident() != "Tensor") r.fail("results must be tensors");
    if (r.eat('(')) r.until_separator(), r.expect(')');
    if (r.eat('[')) {
      r.expect(']');
      s.returns_list = true;
    }
    s.returns.push_back(r.at_ident() ? r.ident() : "");
  };
  if (r.eat('(')) {
    do one_return();
    while (r.eat(','));
    r.expect(')');
  } else {
    one_return();
  }
  if (!r.done()) r.fail("trailing text");
  return s;
}

std::string arg_type_name(const SchemaArg& a) {
  std::string t;
  switch (a.type) {
    case ArgType::Tensor: t = "Tensor"; break;
    case ArgType::TensorList: t = "Tensor[]"; break;
    case ArgType::Int: t = "int"; break;
    case ArgType::IntList: t = a.list_len ? str("int[", a.list_len, "]") : "int[]"; break;
    case ArgType::Float: t = "float"; break;
    case ArgType::Bool: t = "bool"; break;
    case ArgType::Scalar: t = "Scalar"; break;
    case ArgType::Str: t = "str"; break;
    case ArgType::ScalarType: t = "dtype"; break;
    case ArgType::Generator: t = "Generator"; break;
    case ArgType::Device: t = "Device"; break;
    case ArgType::MemoryFormat: t = "MemoryFormat"; break;
  }
  return a.optional ? t + "?" : t;
}

}  // namespace tp
