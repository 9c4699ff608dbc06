"""Each system check id (``statestore.E070``…) belongs to one check: an operator who looks one up in the docs
must find the check that printed it. An id is defined (``id="statestore.…"``) in one module only."""

import re
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "statestore_admin"
DEFINED = re.compile(r'id="(statestore\.[EWI]\d{3})"')


def test_every_check_id_is_defined_in_one_module():
    modules = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        for check_id in DEFINED.findall(path.read_text()):
            modules[check_id].add(str(path.relative_to(PACKAGE)))
    assert len(modules) > 30  # the checks are found at all
    shared = {check_id: sorted(found) for check_id, found in modules.items() if len(found) > 1}
    assert not shared, f"check ids defined in more than one module: {shared}"
