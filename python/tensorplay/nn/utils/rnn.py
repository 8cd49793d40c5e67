"""Variable-length sequences for the recurrent layers: padding and packing.

A PackedSequence stores a batch of sequences time step by time step: `data` holds, for t = 0, 1, ...,
the rows of the sequences still running at step t (longest first), and `batch_sizes[t]` says how many
there are. Because the sequences are sorted by decreasing length, the sequences running at step t are
always the first batch_sizes[t] of the batch, so an RNN step over a packed batch is a step over a
prefix of the hidden state (nn/modules/rnn.py). `sorted_indices` maps that sorted order to the
caller's batch order when the caller's batch was not sorted (enforce_sorted=False); the unpacking
functions put the batch back in the caller's order.

Everything here is a composition of tensor operators (index_select, cat, narrow, stack), so autograd
follows it and tp.compile captures it like any other code; the lengths are host integers.
"""
from collections import namedtuple

import tensorplay as _tp

__all__ = [
    "PackedSequence", "invert_permutation", "pad_sequence", "unpad_sequence", "pack_padded_sequence",
    "pad_packed_sequence", "pack_sequence", "unpack_sequence",
]

_PackedSequenceFields = namedtuple("PackedSequence", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])


def _host_ints(t):
    """A 1-D integer tensor's values as Python ints. int() of each element rather than tolist(), because
    under tp.compile int() becomes a data gate (the program is specialized on the lengths) while tolist()
    cannot be captured."""
    return [int(v) for v in t.unbind(0)] if t.numel() else []


def invert_permutation(permutation):
    """The permutation q with q[p[i]] = i (None stays None)."""
    if permutation is None:
        return None
    inv = [0] * permutation.numel()
    for i, p in enumerate(_host_ints(permutation)):
        inv[p] = i
    return _tp.tensor(inv, dtype=_tp.int64, device=permutation.device)


class PackedSequence(_PackedSequenceFields):
    """(data, batch_sizes, sorted_indices, unsorted_indices); build it with pack_padded_sequence or
    pack_sequence. batch_sizes is an int64 CPU tensor, the permutations are int64 tensors or None."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if batch_sizes is None:
            raise TypeError("PackedSequence: batch_sizes is required (build packed sequences with "
                            "pack_padded_sequence or pack_sequence)")
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def _with_data(self, data):
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def to(self, *args, **kwargs):
        data = self.data.to(*args, **kwargs)
        return self if data is self.data else self._with_data(data)

    def cpu(self):
        return self._with_data(self.data.cpu())

    def cuda(self, *args, **kwargs):
        return self._with_data(self.data.cuda(*args, **kwargs))

    def double(self):
        return self.to(dtype=_tp.float64)

    def float(self):
        return self.to(dtype=_tp.float32)

    def half(self):
        return self.to(dtype=_tp.float16)

    @property
    def is_cuda(self):
        return self.data.is_cuda

    def is_pinned(self):
        return False


def _lengths_list(lengths, op):
    if isinstance(lengths, _tp.Tensor):
        if lengths.dim() != 1:
            raise ValueError(f"{op}: lengths must be a 1-D tensor, got shape {tuple(lengths.shape)}")
        if lengths.dtype.is_floating_point:
            raise TypeError(f"{op}: lengths must be integers, got dtype {lengths.dtype}")
        return _host_ints(lengths)
    try:
        return [int(v) for v in lengths]
    except TypeError:
        raise TypeError(f"{op}: lengths must be a 1-D int64 tensor or a list of ints, got "
                        f"{type(lengths).__name__}") from None


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack tensors of shapes (L_i, *) into (max L, B, *) (or (B, max L, *)), filling with padding_value."""
    if isinstance(sequences, _tp.Tensor):
        sequences = list(sequences.unbind(0))
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("pad_sequence: received an empty list of sequences")
    if padding_side not in ("left", "right"):
        raise ValueError(f"pad_sequence: padding_side must be 'left' or 'right', got {padding_side!r}")
    trailing = tuple(sequences[0].shape[1:])
    for i, s in enumerate(sequences):
        if not isinstance(s, _tp.Tensor) or s.dim() < 1:
            raise TypeError(f"pad_sequence: sequence {i} must be a tensor with at least one dimension")
        if tuple(s.shape[1:]) != trailing:
            raise RuntimeError(f"pad_sequence: all sequences must have the same trailing shape, but sequence 0 "
                               f"has {tuple(sequences[0].shape)} and sequence {i} has {tuple(s.shape)}")
    longest = max(s.shape[0] for s in sequences)
    rows = []
    for s in sequences:
        short = longest - s.shape[0]
        if short:
            pad = _tp.full((short,) + trailing, padding_value, dtype=s.dtype, device=s.device)
            s = _tp.cat([s, pad] if padding_side == "right" else [pad, s], 0)
        rows.append(s)
    return _tp.stack(rows, 0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The inverse of pad_sequence: the list of (L_i, *) tensors."""
    lengths = _lengths_list(lengths, "unpad_sequence")
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    if padded_sequences.shape[0] != len(lengths):
        raise ValueError(f"unpad_sequence: {len(lengths)} lengths for a batch of {padded_sequences.shape[0]} "
                         f"(padded shape {tuple(padded_sequences.shape)})")
    return [padded_sequences[i].narrow(0, 0, n) for i, n in enumerate(lengths)]


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded batch (T, B, *) (or (B, T, *)) of sequences with the given lengths."""
    op = "pack_padded_sequence"
    if not isinstance(input, _tp.Tensor) or input.dim() < 2:
        raise ValueError(f"{op}: input must be a tensor of at least 2 dimensions (time, batch, *), got "
                         f"{tuple(input.shape) if isinstance(input, _tp.Tensor) else type(input).__name__}")
    lengths = _lengths_list(lengths, op)
    bdim = 0 if batch_first else 1
    batch, steps = input.shape[bdim], input.shape[1 - bdim]
    if len(lengths) != batch:
        raise ValueError(f"{op}: expected {batch} lengths for input of shape {tuple(input.shape)} "
                         f"(batch_first={batch_first}), got {len(lengths)}")
    if any(n <= 0 for n in lengths):
        raise RuntimeError(f"{op}: Length of all samples has to be greater than 0, but found an element in "
                           f"'lengths' that is <= 0 (lengths {lengths})")
    if max(lengths) > steps:
        raise RuntimeError(f"{op}: a length of {max(lengths)} exceeds the {steps} time steps of input of shape "
                           f"{tuple(input.shape)}")
    if enforce_sorted:
        if any(a < b for a, b in zip(lengths, lengths[1:])):
            raise RuntimeError(f"{op}: `lengths` array must be sorted in decreasing order when `enforce_sorted` "
                               f"is True (got {lengths}). You can pass `enforce_sorted=False` to "
                               "pack_padded_sequence and/or pack_sequence to sidestep this requirement if you do "
                               "not need ONNX exportability.")
        sorted_indices = None
    else:
        # A stable sort by decreasing length, as the reference does, so ties keep the caller's order.
        order = sorted(range(batch), key=lambda i: -lengths[i])
        sorted_indices = _tp.tensor(order, dtype=_tp.int64, device=input.device)  # on the data's device, as torch
        input = input.index_select(bdim, sorted_indices)
        lengths = [lengths[i] for i in order]
    if batch_first:
        input = input.transpose(0, 1)
    batch_sizes = [sum(1 for n in lengths if n > t) for t in range(lengths[0])]
    data = _tp.cat([input[t].narrow(0, 0, bs) for t, bs in enumerate(batch_sizes)], 0)
    return PackedSequence(data, _tp.tensor(batch_sizes, dtype=_tp.int64), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """The inverse of pack_padded_sequence: (padded (T, B, *) or (B, T, *), lengths as an int64 tensor),
    with the batch in the order it had before packing."""
    op = "pad_packed_sequence"
    if not isinstance(sequence, PackedSequence):
        raise TypeError(f"{op}: expected a PackedSequence, got {type(sequence).__name__}")
    batch_sizes = _host_ints(sequence.batch_sizes)
    steps = len(batch_sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"{op}: Expected total_length to be at least the length of the longest sequence "
                             f"in input, but got total_length={total_length} and max sequence length being {steps}")
        steps = total_length
    data = sequence.data
    batch = batch_sizes[0]
    trailing = tuple(data.shape[1:])
    rows, offset = [], 0
    for bs in batch_sizes:
        step = data.narrow(0, offset, bs)
        offset += bs
        if bs < batch:
            step = _tp.cat([step, _tp.full((batch - bs,) + trailing, padding_value, dtype=data.dtype,
                                           device=data.device)], 0)
        rows.append(step)
    for _ in range(steps - len(batch_sizes)):
        rows.append(_tp.full((batch,) + trailing, padding_value, dtype=data.dtype, device=data.device))
    padded = _tp.stack(rows, 0)
    lengths = [sum(1 for bs in batch_sizes if bs > b) for b in range(batch)]
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices.to(data.device))
        lengths = [lengths[i] for i in _host_ints(sequence.unsorted_indices)]
    if batch_first:
        padded = padded.transpose(0, 1)
    return padded, _tp.tensor(lengths, dtype=_tp.int64)


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of (L_i, *) tensors (longest first unless enforce_sorted=False)."""
    sequences = list(sequences)
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The inverse of pack_sequence: the list of (L_i, *) tensors in the caller's order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
