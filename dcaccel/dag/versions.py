"""Versions of buffer containers while a program is walked in order: which DAG node stands for a
buffer. Reading a buffer uses its current node; writing it after it was read starts a new version
(a new node), so that an in-place update never closes a cycle."""


class BufferVersions:
    """Bookkeeping shared by the DAG walks; a subclass creates the node of a new version."""

    def __init__(self) -> None:
        self.buffer_node: dict[str, int] = {}
        self.buffer_read: set[str] = set()

    def create_buffer(self, data: str) -> int:
        """Add the node of a new version of the buffer ``data`` and return its id."""
        raise NotImplementedError

    def new_buffer(self, data: str) -> int:
        node = self.create_buffer(data)
        self.buffer_node[data] = node
        self.buffer_read.discard(data)
        return node

    def read_buffer(self, data: str) -> int:
        node = self.buffer_node.get(data)
        if node is None:
            node = self.new_buffer(data)
        self.buffer_read.add(data)
        return node

    def write_buffer(self, data: str) -> int:
        if data in self.buffer_read or data not in self.buffer_node:
            return self.new_buffer(data)
        return self.buffer_node[data]
