"""gnnpipe.engine"""
