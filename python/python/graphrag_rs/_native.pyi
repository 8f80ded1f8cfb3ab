"""The compiled module (python/src/lib.rs): see the graphrag_rs package for
the documented API built on it."""

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, final

METHODS: List[str]
MAX_QUESTION_BYTES: int

class GraphragError(Exception): ...
class ConfigError(GraphragError): ...
class NoIndexError(GraphragError): ...
class CancelledError(GraphragError): ...

@final
class CancelToken:
    """Stops a build or a query: ``cancel()`` from any thread ends a query's
    model calls at once, and a build cleanly (answers in flight are cached;
    ``resume=True`` continues)."""

    def __new__(cls) -> "CancelToken": ...
    def cancel(self) -> None:
        """Cancels the query or build this token was given to."""
    @property
    def cancelled(self) -> bool:
        """Whether ``cancel()`` was called."""

_Progress = Callable[[str, int, int, Optional[str]], None]

def init(root: str, force: bool = False) -> str: ...
def build_index(
    root: str,
    method: str = "auto",
    resume: bool = False,
    no_cache: bool = False,
    progress: Optional[_Progress] = None,
    cancel: Optional[CancelToken] = None,
) -> Dict[str, Any]: ...
def update_index(
    root: str,
    method: str = "auto",
    no_cache: bool = False,
    progress: Optional[_Progress] = None,
    cancel: Optional[CancelToken] = None,
) -> Dict[str, Any]: ...
def index_shard(root: str, shard: int, shards: int, method: str = "auto", phase: str = "units") -> Dict[str, Any]: ...
def shard_status(
    root: str, shards: int, method: str = "auto", phase: str = "units"
) -> List[Optional[Dict[str, Any]]]: ...
def merge_graph(root: str, shards: Optional[int] = None, method: str = "auto", stages: bool = False) -> Dict[str, Any]: ...
def merge_shards(
    root: str, shards: Optional[int] = None, method: str = "auto", progress: Optional[_Progress] = None
) -> Dict[str, Any]: ...
def generate_indexing_prompts(
    root: str,
    limit: int = ...,
    selection_method: str = "random",
    domain: Optional[str] = None,
    language: Optional[str] = None,
    max_tokens: int = ...,
    discover_entity_types: bool = True,
    min_examples_required: int = ...,
    n_subset_max: int = ...,
    k: int = ...,
    chunk_size: Optional[int] = None,
    overlap: Optional[int] = None,
    output: Optional[str] = None,
    skip_validation: bool = False,
    cancel: Optional[CancelToken] = None,
) -> Tuple[Tuple[str, str, str], List[str]]: ...
def add_graph_edit(root: str, edit_json: str) -> int: ...
def remove_graph_edit(root: str, edit_json: str) -> bool: ...
def index_dir(root: str) -> str: ...
def input_settings(root: str) -> Tuple[str, str]: ...
def check_graph_edit(root: str, edit_json: str, allow_merge: bool = False) -> None: ...
def entity_titles(root: str) -> List[str]: ...
def add_document(root: str, name: str, content: bytes) -> None: ...
def remove_document(root: str, name: str) -> bytes: ...
def forward_logs() -> None: ...

@final
class NativeIndex:
    def __new__(cls, root: str) -> "NativeIndex": ...
    @property
    def root(self) -> str: ...
    @property
    def version(self) -> str: ...
    def reload(self) -> None: ...
    def source_documents(self, source_ids: List[str]) -> List[str]: ...
    def query(
        self,
        question: str,
        method: str = "local",
        context_only: bool = False,
        community_level: Optional[int] = None,
        response_type: Optional[str] = None,
        dynamic_community_selection: bool = False,
        history: Optional[Sequence[Tuple[str, str]]] = None,
        max_context_tokens: Optional[int] = None,
        on_token: Optional[Callable[[str], None]] = None,
        cancel: Optional[CancelToken] = None,
        enable_rerank: Optional[bool] = None,
    ) -> Tuple[Optional[str], str, str, str, Optional[str]]: ...
