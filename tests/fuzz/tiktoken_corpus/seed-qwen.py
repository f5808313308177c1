PAT_STR = r"""(?i:'s|'t)|\p{N}| ?[^\s\p{L}\p{N}]+"""
