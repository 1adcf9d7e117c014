"""(facade filled in below)"""
