"""gnnpipe.models"""
