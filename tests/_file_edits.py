"""Edits of saved files, for the tests of what loading refuses."""

import numpy as np


def flip_every_byte(path, load_file):
    """Change each byte of the file at ``path`` in turn (XOR with a random non-zero mask)
    and call ``load_file(path)`` on each version.

    Returns the message of the ``ValueError`` each version raised, by position; None
    where it loaded. The file is edited in place, one byte at a time (writing a new file
    per position costs ten times more), and is whole again at the end.
    """
    data = path.read_bytes()
    masks = np.random.RandomState(len(data)).randint(1, 256, size=len(data))
    messages = {}
    with open(path, "r+b", buffering=0) as stream:
        for position, mask in enumerate(masks):
            stream.seek(position)
            stream.write(bytes([data[position] ^ mask]))
            try:
                load_file(path)
                messages[position] = None
            except ValueError as error:
                messages[position] = str(error)
            stream.seek(position)
            stream.write(data[position:position + 1])
    assert path.read_bytes() == data
    return messages
