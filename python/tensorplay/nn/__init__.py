"""tensorplay.nn: modules, parameters, initializers and functional ops with PyTorch's API."""
from .parameter import Buffer, Parameter  # noqa: F401
from .modules import (  # noqa: F401
    Module, Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict, Identity, Linear, Conv1d, Conv2d, Conv3d,
    LayerNorm, RMSNorm, GroupNorm, BatchNorm1d, BatchNorm2d, BatchNorm3d, Embedding, Dropout, Flatten, Unflatten, Fold, Unfold, ReLU, ReLU6, GELU, SiLU, Mish, Softplus,
    ELU, LeakyReLU, Hardtanh, Tanh, Sigmoid, LogSigmoid, Softmax, LogSoftmax, SELU, CELU, Hardsigmoid,
    Hardswish, Softsign, GLU, Softmin, L1Loss, MSELoss, CrossEntropyLoss, NLLLoss, BCELoss, BCEWithLogitsLoss, SmoothL1Loss,
    HuberLoss, KLDivLoss, MaxPool1d, MaxPool2d, AvgPool1d, AvgPool2d, AdaptiveAvgPool2d, MultiheadAttention, TransformerEncoderLayer,
    TransformerEncoder, RNNBase, RNN, LSTM, GRU, RNNCellBase, RNNCell, LSTMCell, GRUCell, Dropout1d, Dropout2d,
    Threshold,
    Hardshrink, Softshrink, Tanhshrink, PReLU, CosineSimilarity, PairwiseDistance, PixelShuffle, PixelUnshuffle,
    MarginRankingLoss, HingeEmbeddingLoss, SoftMarginLoss, CosineEmbeddingLoss, TripletMarginLoss, PoissonNLLLoss,
    GaussianNLLLoss, MultiLabelSoftMarginLoss, CTCLoss, Upsample, UpsamplingNearest2d, UpsamplingBilinear2d,
    ConvTranspose1d, ConvTranspose2d, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, LocalResponseNorm, EmbeddingBag,
)
from .modules.padding import *  # noqa: F401,F403,E402
from .modules import (  # noqa: F401,E402
    AdaptiveAvgPool1d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool3d, MaxPool3d,
    AvgPool3d, LPPool1d, LPPool2d, LPPool3d, Softmax2d, RReLU, ChannelShuffle, Dropout3d, AlphaDropout,
    FeatureAlphaDropout,
    Bilinear, MultiMarginLoss, MultiLabelMarginLoss, TripletMarginWithDistanceLoss,
)
from .modules.transformer import TransformerDecoderLayer, TransformerDecoder, Transformer  # noqa: F401,E402
from .modules.unpool import MaxUnpool1d, MaxUnpool2d, MaxUnpool3d  # noqa: F401,E402
from .modules.lazy import (  # noqa: F401,E402
    LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d, LazyConv1d, LazyConv2d, LazyConv3d, LazyConvTranspose1d,
    LazyConvTranspose2d, LazyConvTranspose3d, LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d, LazyLinear,
)
from .modules.extra_layers import ConvTranspose3d  # noqa: F401,E402
from .modules.pooling import FractionalMaxPool2d, FractionalMaxPool3d  # noqa: F401,E402
from . import functional, init, utils  # noqa: F401
