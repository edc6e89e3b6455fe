"""Image datasets of the catalog, by upstream stable-datasets' names: `from stable_datasets.images import CIFAR100`;
each is also `load_dataset("<module name>")`. See docs/catalog.md."""

from stable_datasets.catalog.exports import lazy_exports

#: class name -> module (the module's name is the dataset's name for load_dataset)
CLASSES = {
    "ArabicCharacters": "arabic_characters", "ArabicDigits": "arabic_digits", "AWA2": "awa2", "Beans": "beans",
    "Cars3D": "cars3d", "Cars196": "cars196", "CIFAR10": "cifar10", "CIFAR10C": "cifar10_c", "CIFAR100": "cifar100",
    "CIFAR100C": "cifar100_c", "CLEVRER": "clevrer", "Country211": "country211", "CUB200": "cub200",
    "CelebA": "celeba", "DSprites": "dsprites", "DSpritesColor": "dsprites_color", "DSpritesNoise": "dsprites_noise",
    "DSpritesScream": "dsprites_scream", "DTD": "dtd", "EMNIST": "emnist", "FacePointing": "face_pointing",
    "FashionMNIST": "fashion_mnist", "FGVCAircraft": "fgvc_aircraft", "Flowers102": "flowers102",
    "Food101": "food101", "Galaxy10Decal": "galaxy10_decal", "HASYv2": "hasy_v2", "ImageNet1K": "imagenet1k",
    "Imagenette": "imagenette", "ImageNet100": "imagenet100", "KMNIST": "kmnist", "Linnaeus5": "linnaeus5",
    "MedMNIST": "medmnist", "MNIST": "mnist", "NotMNIST": "not_mnist", "Places365Small": "places365_small",
    "RockPaperScissor": "rock_paper_scissor", "Shapes3D": "shapes3d", "SmallNORB": "small_norb", "STL10": "stl10",
    "SVHN": "svhn", "TinyImagenet": "tiny_imagenet", "TinyImagenetC": "tiny_imagenet_c",
}
__all__, __getattr__, __dir__ = lazy_exports(__name__, CLASSES)
