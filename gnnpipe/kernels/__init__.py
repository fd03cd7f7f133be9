"""gnnpipe.kernels"""
