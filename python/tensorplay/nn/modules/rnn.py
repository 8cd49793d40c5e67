"""Recurrent layers: RNN (tanh or relu), LSTM and GRU, multi-layer and bidirectional, and
their single-step cells, with PyTorch's parameter names, shapes, gate order and
initialization, so checkpoints load one-to-one.

Each layer and direction multiplies the whole sequence by W_ih once (one GEMM), then
runs the recurrence one time step at a time; autograd records every step like any other
code. Gate order: LSTM (input, forget, cell, output), GRU (reset, update, new), where the
GRU's new gate applies the reset to the hidden projection including its bias. An LSTM with
proj_size projects h by weight_hr after each step. A PackedSequence input (nn/utils/rnn.py) runs
the same loop with a per-step batch size (see _run_direction).
"""
import math

import tensorplay as _tp
from .. import functional as F
from .. import init
from ..parameter import Parameter
from ..utils.rnn import PackedSequence, _host_ints
from .linear import _check_device
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _lstm_step(xw, h, c, w_hh, b_hh):
    gates = xw + F.linear(h, w_hh, b_hh)
    i, f, g, o = gates.chunk(4, -1)
    c = _tp.sigmoid(f) * c + _tp.sigmoid(i) * _tp.tanh(g)
    return _tp.sigmoid(o) * _tp.tanh(c), c


def _gru_step(xw, h, w_hh, b_hh):
    xr, xz, xn = xw.chunk(3, -1)
    hr, hz, hn = F.linear(h, w_hh, b_hh).chunk(3, -1)
    r = _tp.sigmoid(xr + hr)
    z = _tp.sigmoid(xz + hz)
    n = _tp.tanh(xn + r * hn)
    return n + z * (h - n)  # (1 - z) * n + z * h


def _rnn_step(xw, h, w_hh, b_hh, relu):
    pre = xw + F.linear(h, w_hh, b_hh)
    return _tp.relu(pre) if relu else _tp.tanh(pre)


class RNNBase(Module):
    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        _check_device(device)
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError(f"hidden_size must be a positive integer, got {hidden_size}")
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError(f"num_layers must be a positive integer, got {num_layers}")
        if isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError(f"{mode}: dropout is a probability in [0, 1], got {dropout}")
        if not isinstance(proj_size, int) or proj_size < 0:
            raise ValueError(f"{mode}: proj_size should be a non-negative integer, got {proj_size}")
        if proj_size and mode != "LSTM":
            raise ValueError(f"{mode}: proj_size argument is only supported for LSTM, not RNN or GRU")
        if proj_size >= hidden_size:
            raise ValueError(f"{mode}: proj_size has to be smaller than hidden_size, got proj_size={proj_size} "
                             f"and hidden_size={hidden_size}")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        gate = _GATES[mode] * hidden_size
        dirs = 2 if bidirectional else 1
        out_size = proj_size or hidden_size  # the features of h (an LSTM with proj_size projects h)
        self._flat_weights_names = []
        for layer in range(num_layers):
            in_size = input_size if layer == 0 else out_size * dirs
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                names = [("weight_ih" + sfx, (gate, in_size)), ("weight_hh" + sfx, (gate, out_size))]
                if bias:
                    names += [("bias_ih" + sfx, (gate,)), ("bias_hh" + sfx, (gate,))]
                if proj_size:
                    names.append(("weight_hr" + sfx, (proj_size, hidden_size)))
                for name, shape in names:
                    setattr(self, name, Parameter(_tp.empty(*shape, dtype=dtype)))
                    self._flat_weights_names.append(name)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def flatten_parameters(self):
        """A no-op, as PyTorch's on the CPU: the weights are used where they are (code written for
        cuDNN calls it after moving or replicating the module)."""

    @property
    def all_weights(self):
        per = (4 if self.bias else 2) + (1 if self.proj_size else 0)
        names = self._flat_weights_names
        return [[getattr(self, n) for n in names[i:i + per]] for i in range(0, len(names), per)]

    def _layer_params(self, layer, direction):
        sfx = f"_l{layer}" + ("_reverse" if direction else "")
        get = lambda n: getattr(self, n + sfx) if self.bias or n.startswith("weight") else None  # noqa: E731
        w_hr = getattr(self, "weight_hr" + sfx) if self.proj_size else None
        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"), w_hr

    def _check_input(self, input, hx):
        name = type(self).__name__
        if isinstance(input, PackedSequence):
            if input.data.dim() != 2:
                raise ValueError(f"{name}: packed input data must be 2D (total steps, input_size), got shape "
                                 f"{tuple(input.data.shape)}")
            if input.data.shape[-1] != self.input_size:
                raise ValueError(f"{name}: input.size(-1) is {input.data.shape[-1]} but input_size is "
                                 f"{self.input_size} (packed data of shape {tuple(input.data.shape)})")
            return
        if not isinstance(input, _tp.Tensor):
            raise TypeError(f"{name}: expected a Tensor or a PackedSequence as input, got {type(input).__name__}")
        if input.dim() not in (2, 3):
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D input of shape "
                             f"{tuple(input.shape)}")
        if input.shape[-1] != self.input_size:
            raise ValueError(f"{name}: input.size(-1) is {input.shape[-1]} but input_size is {self.input_size} "
                             f"(input of shape {tuple(input.shape)})")

    def _initial_state(self, input, hx, batched, batch, sorted_indices=None):
        dirs = 2 if self.bidirectional else 1
        lead = (self.num_layers * dirs, batch) if batched else (self.num_layers * dirs,)
        want_h = lead + (self.proj_size or self.hidden_size,)
        want_c = lead + (self.hidden_size,)
        name = type(self).__name__
        if hx is None:  # zeros with the batch dimension (1 when unbatched: the input was unsqueezed)
            full = (self.num_layers * dirs, batch)
            h = _tp.zeros(*full, want_h[-1], dtype=input.dtype, device=input.device)
            return (h, _tp.zeros(*full, want_c[-1], dtype=input.dtype, device=input.device) if want_c != want_h else h) \
                if self.mode == "LSTM" else (h,)
        states = tuple(hx) if self.mode == "LSTM" else (hx,)
        if self.mode == "LSTM" and len(states) != 2:
            raise ValueError(f"{name}: hx must be a tuple (h_0, c_0)")
        for s, want, what in zip(states, (want_h, want_c), ("hidden", "cell")):
            if tuple(s.shape) != want:
                raise ValueError(f"{name}: Expected {what} size {want}, got {tuple(s.shape)}")
        if sorted_indices is not None:  # the caller's batch order -> the packed (longest first) order
            states = tuple(s.index_select(1, sorted_indices.to(s.device)) for s in states)
        return tuple(s if batched else s.unsqueeze(1) for s in states)

    def _run_direction(self, xw, batch_sizes, h, c, params, reverse):
        """One layer in one direction. xw[t] is step t's input projection for the batch_sizes[t] sequences
        still running at t (a prefix of the batch: packed batches are sorted longest first); h and c hold
        the whole batch. Returns the per-step outputs and the final (h, c) of every sequence: in the forward
        direction a sequence's final state is the one after its own last step, in the reverse direction
        each sequence starts from its initial state at its own last step."""
        _, w_hh, _, b_hh, w_hr = params
        steps = len(xw)
        seq = [None] * steps
        lstm = self.mode == "LSTM"
        if reverse:
            h0, c0 = h, c
            live = batch_sizes[-1] if steps else h0.shape[0]
            h, c = h0.narrow(0, 0, live), (c0.narrow(0, 0, live) if lstm else None)
        done = []  # forward: the final states of the sequences that ended, in the order they ended
        for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
            bs = batch_sizes[t]
            if bs != h.shape[0]:
                if reverse:  # more sequences join; they start from their initial state
                    h = _tp.cat([h, h0.narrow(0, h.shape[0], bs - h.shape[0])], 0)
                    c = _tp.cat([c, c0.narrow(0, c.shape[0], bs - c.shape[0])], 0) if lstm else None
                else:  # the last h.shape[0] - bs sequences have ended
                    done.append((h.narrow(0, bs, h.shape[0] - bs), c.narrow(0, bs, c.shape[0] - bs) if lstm
                                 else None))
                    h, c = h.narrow(0, 0, bs), (c.narrow(0, 0, bs) if lstm else None)
            if lstm:
                h, c = _lstm_step(xw[t], h, c, w_hh, b_hh)
                if w_hr is not None:
                    h = F.linear(h, w_hr)
            elif self.mode == "GRU":
                h = _gru_step(xw[t], h, w_hh, b_hh)
            else:
                h = _rnn_step(xw[t], h, w_hh, b_hh, self.mode == "RNN_RELU")
            seq[t] = h
        if done:
            h = _tp.cat([h] + [d[0] for d in reversed(done)], 0)
            c = _tp.cat([c] + [d[1] for d in reversed(done)], 0) if lstm else None
        return seq, h, c

    def forward(self, input, hx=None):
        self._check_input(input, hx)
        packed = isinstance(input, PackedSequence)
        if packed:
            batch_sizes = _host_ints(input.batch_sizes)
            sorted_indices, unsorted_indices = input.sorted_indices, input.unsorted_indices
            layer_in, batched = input.data, True
            states = self._initial_state(layer_in, hx, True, batch_sizes[0], sorted_indices)
        else:
            batched = input.dim() == 3
            if not batched:
                input = input.unsqueeze(1)
            elif self.batch_first:
                input = input.transpose(0, 1)
            steps, batch = input.shape[0], input.shape[1]
            batch_sizes = [batch] * steps
            states = self._initial_state(input, hx, batched, batch)
            layer_in = input
        dirs = 2 if self.bidirectional else 1
        out_size = self.proj_size or self.hidden_size
        last_h, last_c = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                params = self._layer_params(layer, d)
                xw = F.linear(layer_in, params[0], params[2])  # the input projection of every step at once
                xw = xw.split(batch_sizes, 0) if packed else xw.unbind(0)
                c0 = states[1][k] if self.mode == "LSTM" else None
                seq, h, c = self._run_direction(xw, batch_sizes, states[0][k], c0, params, d == 1)
                if packed:
                    outs.append(_tp.cat(seq, 0))
                else:
                    outs.append(_tp.stack(seq, 0) if seq else _tp.zeros(0, layer_in.shape[1], out_size,
                                                                        dtype=layer_in.dtype,
                                                                        device=layer_in.device))
                last_h.append(h)
                last_c.append(c)
            layer_in = outs[0] if dirs == 1 else _tp.cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_in = F.dropout(layer_in, self.dropout, True)
        output = layer_in
        h_n = _tp.stack(last_h, 0)
        c_n = _tp.stack(last_c, 0) if self.mode == "LSTM" else None
        if packed:
            output = PackedSequence(output, input.batch_sizes, sorted_indices, unsorted_indices)
            if unsorted_indices is not None:  # back to the caller's batch order
                unsorted_indices = unsorted_indices.to(h_n.device)
                h_n = h_n.index_select(1, unsorted_indices)
                c_n = c_n.index_select(1, unsorted_indices) if c_n is not None else None
        elif not batched:
            output, h_n = output.squeeze(1), h_n.squeeze(1)
            c_n = c_n.squeeze(1) if c_n is not None else None
        elif self.batch_first:
            output = output.transpose(0, 1)
        return (output, (h_n, c_n)) if self.mode == "LSTM" else (output, h_n)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.mode == "RNN_RELU":
            s += ", nonlinearity='relu'"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        return s


class RNN(RNNBase):
    """Elman RNN: h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh), act tanh or relu."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size, num_layers,
                         bias, batch_first, dropout, bidirectional, 0, device, dtype)


class LSTM(RNNBase):
    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device, dtype)


class GRU(RNNBase):
    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0,
                         device, dtype)


class RNNCellBase(Module):
    def __init__(self, input_size, hidden_size, bias, gates, device, dtype):
        super().__init__()
        _check_device(device)
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(_tp.empty(gates * hidden_size, input_size, dtype=dtype))
        self.weight_hh = Parameter(_tp.empty(gates * hidden_size, hidden_size, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(_tp.empty(gates * hidden_size, dtype=dtype))
            self.bias_hh = Parameter(_tp.empty(gates * hidden_size, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0.0
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def _prepare(self, input, hx):
        name = type(self).__name__
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if input.shape[-1] != self.input_size:
            raise ValueError(f"{name}: input has inconsistent input_size: got {input.shape[-1]} expected "
                             f"{self.input_size}")
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
        shape = (input.shape[0], self.hidden_size)
        if hx is None:
            hx = [_tp.zeros(*shape, dtype=input.dtype)] * (2 if isinstance(self, LSTMCell) else 1)
        else:
            hx = list(hx) if isinstance(hx, (tuple, list)) else [hx]
            hx = [h if batched else h.unsqueeze(0) for h in hx]
            for h in hx:
                if tuple(h.shape) != shape:
                    raise ValueError(f"{name}: hidden state of shape {tuple(h.shape)} does not match "
                                     f"(batch, hidden_size) = {shape}")
        return input, hx, batched

    def extra_repr(self):
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RNNCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)

    def forward(self, input, hx=None):
        input, (h,), batched = self._prepare(input, hx)
        h = _rnn_step(F.linear(input, self.weight_ih, self.bias_ih), h, self.weight_hh, self.bias_hh,
                      self.nonlinearity == "relu")
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        input, (h, c), batched = self._prepare(input, hx)
        h, c = _lstm_step(F.linear(input, self.weight_ih, self.bias_ih), h, c, self.weight_hh, self.bias_hh)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        input, (h,), batched = self._prepare(input, hx)
        h = _gru_step(F.linear(input, self.weight_ih, self.bias_ih), h, self.weight_hh, self.bias_hh)
        return h if batched else h.squeeze(0)


_CellBase = RNNCellBase
