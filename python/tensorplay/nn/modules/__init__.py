"""The layer classes of tensorplay.nn, one family per file."""
from .module import Module  # noqa: F401
from .container import Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict  # noqa: F401
from .linear import Identity, Linear  # noqa: F401
from .conv import Conv1d, Conv2d, Conv3d  # noqa: F401
from .normalization import LayerNorm, RMSNorm, GroupNorm  # noqa: F401
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d  # noqa: F401
from .sparse import Embedding  # noqa: F401
from .dropout import Dropout, Dropout1d, Dropout2d  # noqa: F401
from .flatten import Flatten, Unflatten  # noqa: F401
from .fold import Fold, Unfold  # noqa: F401
from .activation import (  # noqa: F401
    ReLU, ReLU6, GELU, SiLU, Mish, Softplus, ELU, LeakyReLU, Hardtanh, Tanh, Sigmoid, LogSigmoid, Softmax,
    LogSoftmax, SELU, CELU, Hardsigmoid, Hardswish, Softsign, GLU, Softmin, Threshold, Hardshrink, Softshrink,
    Tanhshrink, PReLU,
)
from .distance import (  # noqa: F401
    CosineSimilarity, PairwiseDistance, PixelShuffle, PixelUnshuffle, Upsample, UpsamplingNearest2d, UpsamplingBilinear2d,
)
from .loss import (  # noqa: F401
    L1Loss, MSELoss, CrossEntropyLoss, NLLLoss, BCELoss, BCEWithLogitsLoss, SmoothL1Loss, HuberLoss, KLDivLoss,
    MarginRankingLoss, HingeEmbeddingLoss, SoftMarginLoss, CosineEmbeddingLoss, TripletMarginLoss, PoissonNLLLoss,
    GaussianNLLLoss, MultiLabelSoftMarginLoss, CTCLoss,
)
from .pooling import MaxPool1d, MaxPool2d, AvgPool1d, AvgPool2d, AdaptiveAvgPool2d  # noqa: F401
from .attention import MultiheadAttention  # noqa: F401
from .transformer import (  # noqa: F401
    TransformerEncoderLayer, TransformerEncoder, TransformerDecoderLayer, TransformerDecoder, Transformer,
)
from .rnn import RNNBase, RNN, LSTM, GRU, RNNCell, LSTMCell, GRUCell  # noqa: F401
from .extra_layers import (  # noqa: F401
    ConvTranspose1d, ConvTranspose2d, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, LocalResponseNorm, EmbeddingBag,
)
from .more_layers import *  # noqa: F401,F403,E402  (padding layers, 1d/max adaptive pools, LPPool, Bilinear, ...)
