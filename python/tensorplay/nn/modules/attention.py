"""MultiheadAttention with PyTorch's parameter layout (in_proj_weight/in_proj_bias/out_proj, or
q/k/v_proj_weight when key/value dims differ), so state dicts map one-to-one."""
import math

import tensorplay as _tp
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .linear import Linear, _check_device
from .module import Module

__all__ = ["MultiheadAttention"]


class NonDynamicallyQuantizableLinear(Linear):
    """A Linear under PyTorch's name for MultiheadAttention.out_proj (it shows in reprs)."""


class MultiheadAttention(Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        super().__init__()
        _check_device(device)
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} "
                             f"and num_heads={num_heads} instead")
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        E = embed_dim
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(_tp.empty(3 * E, E, dtype=dtype))
            for n in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(n, None)
        else:
            self.q_proj_weight = Parameter(_tp.empty(E, E, dtype=dtype))
            self.k_proj_weight = Parameter(_tp.empty(E, self.kdim, dtype=dtype))
            self.v_proj_weight = Parameter(_tp.empty(E, self.vdim, dtype=dtype))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(_tp.empty(3 * E, dtype=dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(E, E, bias=bias, dtype=dtype)
        if add_bias_kv:
            self.bias_k = Parameter(_tp.empty(1, 1, E, dtype=dtype))
            self.bias_v = Parameter(_tp.empty(1, 1, E, dtype=dtype))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    # ------------------------------------------------------------ helpers
    def _projections(self):
        E = self.embed_dim
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            ws = (w[0:E], w[E:2 * E], w[2 * E:3 * E])
        else:
            ws = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
        b = self.in_proj_bias
        bs = (b[0:E], b[E:2 * E], b[2 * E:3 * E]) if b is not None else (None, None, None)
        return ws, bs

    @staticmethod
    def _float_mask(mask, dtype, name):
        """A bool mask (True = masked out) becomes an additive float mask with -inf."""
        if mask is None:
            return None
        if mask.dtype == _tp.bool:
            return _tp.where(mask, float("-inf"), _tp.zeros(*mask.shape, dtype=dtype))
        if "float" not in str(mask.dtype):
            raise TypeError(f"MultiheadAttention: only bool and floating types of {name} are supported")
        return mask.to(dtype)

    @staticmethod
    def _pad_last(t, value=0.0):
        """Appends one column (value) along the last dim: the slot added by bias_kv / zero_attn."""
        if t is None:
            return None
        extra = _tp.full([*t.shape[:-1], 1], value, dtype=t.dtype)
        return F._op("cat")([t, extra], -1)

    # ------------------------------------------------------------ forward
    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer "
                               "module method `generate_square_subsequent_mask` to create this mask.")
        batched = query.dim() == 3
        if not batched:
            query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif not self.batch_first:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        out, weights = self._attend(query, key, value, key_padding_mask, need_weights, attn_mask,
                                    average_attn_weights)
        if not batched:
            out = out.squeeze(0)
            weights = weights.squeeze(0) if weights is not None else None
        elif not self.batch_first:
            out = out.transpose(0, 1)
        return out, weights

    def _attend(self, query, key, value, key_padding_mask, need_weights, attn_mask, average_attn_weights):
        ws, bs = self._projections()
        return _attention(query, key, value, self.embed_dim, self.num_heads, ws, bs, self.bias_k, self.bias_v,
                          self.add_zero_attn, self.dropout if self.training else 0.0, self.out_proj.weight,
                          self.out_proj.bias, key_padding_mask, need_weights, attn_mask, average_attn_weights)


def _attention(query, key, value, embed_dim, num_heads, ws, bs, bias_k, bias_v, add_zero_attn, dropout_p, out_w,
               out_b, key_padding_mask, need_weights, attn_mask, average_attn_weights):
    """Multi-head attention in (N, L, E) layout, shared by MultiheadAttention and
    F.multi_head_attention_forward."""
    _float_mask, _pad_last = MultiheadAttention._float_mask, MultiheadAttention._pad_last
    N, L, E = query.shape
    S = key.shape[1]
    H = num_heads
    D = embed_dim // H
    if E != embed_dim:
        raise ValueError(f"was expecting embedding dimension of {embed_dim}, but got {E}")
    # Shape errors name the argument, as PyTorch's do (else a reshape deep inside reported them).
    if key.shape[0] != N or value.shape[0] != N or value.shape[1] != S:
        raise ValueError(f"MultiheadAttention: key of shape {tuple(key.shape)} and value of shape "
                         f"{tuple(value.shape)} must match each other in batch and sequence length, and the query "
                         f"of shape {tuple(query.shape)} in batch (shapes here are batch-first)")
    if key_padding_mask is not None and tuple(key_padding_mask.shape) != (N, S):
        raise ValueError(f"MultiheadAttention: expecting key_padding_mask of shape {(N, S)}, but got "
                         f"{tuple(key_padding_mask.shape)}")
    if attn_mask is not None:
        want = {2: (L, S), 3: (N * H, L, S)}.get(attn_mask.dim())
        if want is None:
            raise ValueError(f"MultiheadAttention: attn_mask's dimension {attn_mask.dim()} is not supported "
                             f"(2-D (L, S) or 3-D (N * num_heads, L, S))")
        if tuple(attn_mask.shape) != want:
            raise ValueError(f"MultiheadAttention: the shape of the {attn_mask.dim()}D attn_mask is "
                             f"{tuple(attn_mask.shape)}, but should be {want}")
    (wq, wk, wv), (bq, bk, bv) = ws, bs
    q, k, v = F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)
    attn_mask = _float_mask(attn_mask, q.dtype, "attn_mask")
    key_padding_mask = _float_mask(key_padding_mask, q.dtype, "key_padding_mask")
    if attn_mask is not None and attn_mask.dim() == 3:
        attn_mask = attn_mask.reshape([N, H, L, S])
    if bias_k is not None:
        k = F._op("cat")([k, bias_k.expand(N, 1, E)], 1)
        v = F._op("cat")([v, bias_v.expand(N, 1, E)], 1)
        attn_mask, key_padding_mask = _pad_last(attn_mask), _pad_last(key_padding_mask)
        S += 1
    q = q.reshape([N, L, H, D]).transpose(1, 2)
    k = k.reshape([N, S, H, D]).transpose(1, 2)
    v = v.reshape([N, S, H, D]).transpose(1, 2)
    if add_zero_attn:
        k = F._op("cat")([k, _tp.zeros(N, H, 1, D, dtype=k.dtype)], 2)
        v = F._op("cat")([v, _tp.zeros(N, H, 1, D, dtype=v.dtype)], 2)
        attn_mask, key_padding_mask = _pad_last(attn_mask), _pad_last(key_padding_mask)
        S += 1
    if key_padding_mask is not None:
        kpm = key_padding_mask.reshape([N, 1, 1, S])
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    if not need_weights:
        # PyTorch runs scaled_dot_product_attention here: a query whose every key is masked
        # (a padded sequence under a causal mask) gives 0, not softmax's NaN.
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p)
        return F.linear(out.transpose(1, 2).reshape([N, L, E]), out_w, out_b), None
    scores = _tp.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
    if attn_mask is not None:
        scores = scores + attn_mask
    weights = F.softmax(scores, -1)
    if dropout_p > 0.0:
        weights = F.dropout(weights, dropout_p, True)
    out = _tp.matmul(weights, v).transpose(1, 2).reshape([N, L, E])
    out = F.linear(out, out_w, out_b)
    if average_attn_weights:
        weights = weights.mean(1)
    return out, weights


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """PyTorch's functional multi-head attention: (L, N, E) inputs (or unbatched (L, E)), weights
    passed in; the same computation as MultiheadAttention."""
    if static_k is not None or static_v is not None:
        raise NotImplementedError("multi_head_attention_forward: static_k / static_v are not supported")
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer "
                           "module method `generate_square_subsequent_mask` to create this mask.")
    if query.dim() not in (2, 3) or key.dim() != query.dim() or value.dim() != query.dim():
        raise ValueError(f"multi_head_attention_forward: expected query, key and value all 2-D (unbatched) or "
                         f"3-D (L, N, E), got shapes {tuple(query.shape)}, {tuple(key.shape)}, "
                         f"{tuple(value.shape)}")
    if query.shape[-1] != embed_dim_to_check:
        raise ValueError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {query.shape[-1]}")
    E = embed_dim_to_check
    if E % num_heads:
        raise ValueError(f"embed_dim {E} not divisible by num_heads {num_heads}")
    batched = query.dim() == 3
    if batched:
        query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
    else:
        query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    if use_separate_proj_weight:
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise ValueError("use_separate_proj_weight is True but q_proj_weight, k_proj_weight or v_proj_weight "
                             "is None")
        ws = (q_proj_weight, k_proj_weight, v_proj_weight)
    else:
        if in_proj_weight is None:
            raise ValueError("use_separate_proj_weight is False but in_proj_weight is None")
        ws = (in_proj_weight[0:E], in_proj_weight[E:2 * E], in_proj_weight[2 * E:3 * E])
    b = in_proj_bias
    bs = (b[0:E], b[E:2 * E], b[2 * E:3 * E]) if b is not None else (None, None, None)
    out, weights = _attention(query, key, value, E, num_heads, ws, bs, bias_k, bias_v, add_zero_attn,
                              dropout_p if training else 0.0, out_proj_weight, out_proj_bias, key_padding_mask,
                              need_weights, attn_mask, average_attn_weights)
    if batched:
        return out.transpose(0, 1), weights
    return out.squeeze(0), (weights.squeeze(0) if weights is not None else None)
