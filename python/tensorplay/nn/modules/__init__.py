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
from .rnn import RNNBase, RNN, LSTM, GRU, RNNCellBase, RNNCell, LSTMCell, GRUCell  # noqa: F401
from .extra_layers import (  # noqa: F401
    ConvTranspose1d, ConvTranspose2d, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, LocalResponseNorm, EmbeddingBag,
)
from .padding import *  # noqa: F401,F403,E402  (Zero/Constant/Reflection/Replication/CircularPad 1d-3d)
from .pooling import (  # noqa: F401,E402
    AdaptiveAvgPool1d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool3d, MaxPool3d,
    AvgPool3d, LPPool1d, LPPool2d, LPPool3d, FractionalMaxPool2d, FractionalMaxPool3d,
)
from .activation import Softmax2d, RReLU  # noqa: F401,E402
from .channel_shuffle import ChannelShuffle  # noqa: F401,E402
from .dropout import Dropout3d, AlphaDropout, FeatureAlphaDropout  # noqa: F401,E402
from .linear import Bilinear  # noqa: F401,E402
from .loss import MultiMarginLoss, MultiLabelMarginLoss, TripletMarginWithDistanceLoss  # noqa: F401,E402
