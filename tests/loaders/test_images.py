"""PIL and torchvision read images through the mount, unmodified.

Every decoded picture is compared, as a numpy array or tensor, with the same
file decoded from its local copy."""

import os

import pytest

np = pytest.importorskip("numpy")
Image = pytest.importorskip("PIL.Image")


def decoded(path):
    with Image.open(path) as img:
        img.load()
        return img.format, img.mode, img.size, np.asarray(img)


def test_pil_open_load_jpeg_and_png_pixels_equal(data_mount, loader_data, redirected):
    keys = loader_data.keys("images/")
    assert any(k.endswith(".jpg") for k in keys) and any(k.endswith(".png") for k in keys)
    with redirected():
        for key in keys:
            fmt, mode, size, px = decoded(data_mount.join(key))
            want = decoded(loader_data.local(key))
            assert (fmt, mode, size) == want[:3], key
            assert px.shape == want[3].shape and np.array_equal(px, want[3]), \
                "%s: pixels differ from the local copy" % key


def test_pil_reads_header_then_seeks(data_mount, loader_data):
    """Image.open reads only the header; load() later re-reads from the start
    after other files were opened (the lazy pattern of dataset code)."""
    keys = loader_data.keys("images/")
    opened = [Image.open(data_mount.join(k)) for k in keys]
    try:
        assert [(i.format, i.size) for i in opened] == \
            [decoded(loader_data.local(k))[::2] for k in keys]
        for key, img in zip(reversed(keys), reversed(opened)):
            img.load()
            assert np.array_equal(np.asarray(img), decoded(loader_data.local(key))[3]), key
    finally:
        for i in opened:
            i.close()


# -- torchvision ImageFolder + DataLoader ---------------------------------------------
torch = pytest.importorskip("torch")
datasets = pytest.importorskip("torchvision.datasets")
transforms = pytest.importorskip("torchvision.transforms")

WORKERS = 4
EPOCHS = 2


class WithPath(torch.utils.data.Dataset):
    """An ImageFolder sample with its path relative to the root, so a sample
    can be matched with its local copy whatever order the loader takes."""

    def __init__(self, folder):
        self.folder = folder

    def __len__(self):
        return len(self.folder)

    def __getitem__(self, i):
        path, _ = self.folder.samples[i]
        x, y = self.folder[i]
        return os.path.relpath(path, self.folder.root), x, y


def keep_list(batch):
    return batch  # images differ in size: no stacking


def folder(root):
    return datasets.ImageFolder(root, transform=transforms.PILToTensor())


@pytest.fixture(scope="session")
def local_tree(loader_data):
    f = folder(loader_data.local("tree"))
    ref = {rel: (x, y) for rel, x, y in WithPath(f)}
    return f, ref


def run_epochs(root, local_tree, classes, per_class):
    local, ref = local_tree
    ds = folder(root)
    assert ds.classes == local.classes == sorted(classes)
    assert ds.class_to_idx == local.class_to_idx
    assert [(os.path.relpath(p, root), y) for p, y in ds.samples] == \
        [(os.path.relpath(p, local.root), y) for p, y in local.samples]
    assert len(ds) == len(classes) * per_class
    loader = torch.utils.data.DataLoader(
        WithPath(ds), batch_size=8, shuffle=True, num_workers=WORKERS, collate_fn=keep_list,
        generator=torch.Generator().manual_seed(6))
    orders = []
    for epoch in range(EPOCHS):
        order = []
        for batch in loader:
            for rel, x, y in batch:
                want_x, want_y = ref[rel]
                assert y == want_y, "%s: class %d, want %d" % (rel, y, want_y)
                assert x.dtype == torch.uint8 and x.shape == want_x.shape, \
                    "%s: shape %s, want %s" % (rel, tuple(x.shape), tuple(want_x.shape))
                assert torch.equal(x, want_x), "%s: pixels differ (epoch %d)" % (rel, epoch)
                order.append(rel)
        assert sorted(order) == sorted(ref), "epoch %d did not see every sample once" % epoch
        orders.append(order)
    assert orders[0] != orders[1], "shuffle=True gave the same order twice"


# 4 workers on a machine with fewer CPUs is the point, not a mistake
pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")


def test_imagefolder_dataloader_two_epochs(data_mount, loader_data, local_tree, redirected):
    with redirected():
        run_epochs(data_mount.join("tree"), local_tree, loader_data.classes,
                   loader_data.per_class)


def test_imagefolder_dataloader_training_profile(mount, loader_data, local_tree, redirected):
    m = mount(loader_data.bucket, "profile=training")
    with redirected():
        run_epochs(m.join("tree"), local_tree, loader_data.classes, loader_data.per_class)
    m.check_alive()



# -- the README's order hint: a Sampler hands each epoch's order to the mount -----------
def readme_block(after):
    """The first ```python block of README.md after the heading `after`."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "README.md")) as f:
        text = f.read()
    start = text.index("```python\n", text.index(after)) + len("```python\n")
    return text[start:text.index("```", start)]


class Raw(torch.utils.data.Dataset):
    def __init__(self, root, names):
        self.root, self.names = root, names

    def __len__(self):
        return len(self.names)

    def __getitem__(self, i):
        with open(os.path.join(self.root, self.names[i]), "rb") as f:
            return self.names[i], f.read()


def test_readme_hinted_sampler_feeds_the_prefetch(mount, loader_data):
    """The README's HintedRandomSampler, as written there, with a DataLoader
    of 4 workers: every sample's bytes are the local copy's, and the files
    the workers open were fetched ahead of them."""
    from harness import admin

    scope = {}
    exec(readme_block("### Order hints"), scope)
    m = mount(loader_data.bucket)
    root = m.join("tree")
    names = [k[len("tree/"):] for k in loader_data.keys("tree/")]
    loader = torch.utils.data.DataLoader(
        Raw(root, names), batch_size=4, num_workers=WORKERS, collate_fn=keep_list,
        sampler=scope["HintedRandomSampler"](root, names))
    seen = []
    for batch in loader:
        for name, data in batch:
            with open(loader_data.local("tree/" + name), "rb") as f:
                assert data == f.read(), name
            seen.append(name)
    assert sorted(seen) == sorted(names)
    st = admin.stats_json(m.path)["prefetch"]
    assert st["hinted"] == len(names), st
    assert st["hint_skipped"] == 0, st
    assert st["hits"] >= 0.5 * len(names), st
    m.check_alive()
