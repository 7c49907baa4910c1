"""expansions"""
