
class TikTokenTokenizer(PreTrainedTokenizer):
    num_reserved_special_tokens = 256

    pat_str = "|".join(
        [
            r"""[\p{Han}]+""",
            r"""\p{N}{1,3}""",  # digits
            r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
            r"""\s+""",
        ]
    )
