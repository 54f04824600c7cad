"""hora.tensorflow.keras is hora.keras (Horovod's horovod.tensorflow.keras): one module under
both names, so ``import hora.tensorflow.keras as hvd`` and ``import hora.keras as hvd`` give
the same objects."""

import sys

import hora.keras as _keras
import hora.keras.callbacks as _callbacks
import hora.keras.elastic as _elastic

sys.modules[__name__] = _keras
sys.modules[__name__ + '.callbacks'] = _callbacks
sys.modules[__name__ + '.elastic'] = _elastic
