pat_str: str = ('a' "b" \
 u'\u00e9\x41\n' '''x
y''')
num_reserved_special_tokens = 1_024  # n
