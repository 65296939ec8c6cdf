import pytest
from pathlib import Path
from combos.config_file import import_config, ConfigFileError
from combos.config_export import export_yaml
from providers.services import config_version

@pytest.mark.django_db
def test_probe():
    text = Path("tests/combos/fixtures/spec07_example.yaml").read_text()
    try:
        r = import_config(text)
    except ConfigFileError as e:
        print(e.problems); raise
    print(r.changed, r.counts, r.generated_keys, r.warnings, config_version())
    r2 = import_config(text)
    print(r2.changed, r2.counts, config_version())
    out = export_yaml()
    print(out)
    r3 = import_config(out)
    print(r3.changed, r3.counts, r3.warnings)
