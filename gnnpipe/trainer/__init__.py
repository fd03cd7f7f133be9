"""gnnpipe.trainer"""
