"""Gradient compression (Horovod's horovod.tensorflow.compression): none, or float16 on the wire."""

import tensorflow as tf


class Compressor(object):
    """Compresses a tensor before its allreduce and restores it after."""
    @staticmethod
    def compress(tensor):
        """Returns (compressed tensor, context for decompress)."""
        pass

    @staticmethod
    def decompress(tensor, ctx):
        pass


class NoneCompressor(Compressor):
    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
    """Floating-point tensors travel as float16 and come back in their own dtype."""
    @staticmethod
    def compress(tensor):
        tensor_compressed = tensor
        if tensor.dtype.is_floating:
            tensor_compressed = tf.cast(tensor, dtype=tf.float16)
        return tensor_compressed, tensor.dtype

    @staticmethod
    def decompress(tensor, ctx):
        dtype = ctx
        if dtype.is_floating:
            return tf.cast(tensor, dtype=dtype)
        return tensor


class Compression(object):
    none = NoneCompressor
    fp16 = FP16Compressor
