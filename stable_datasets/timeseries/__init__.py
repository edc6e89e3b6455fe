"""Time-series and audio datasets of the catalog, by upstream stable-datasets' names: `from
stable_datasets.timeseries import SpeechCommands`; each is also `load_dataset("<module name>")`. See
docs/catalog.md."""

from stable_datasets.catalog.exports import lazy_exports

#: class name -> module (the module's name is the dataset's name for load_dataset)
CLASSES = {
    "AudioMNIST": "audio_mnist", "BirdVoxDCASE20k": "birdvox_dcase20k", "CatsDogs": "cats_dogs",
    "Freefield1010": "freefield1010", "FSDKaggle2018": "fsd_kaggle2018", "GrooveMIDI": "groove_midi",
    "GTZAN": "gtzan", "JapaneseVowels": "japanese_vowels", "MosquitoSound": "mosquito_sound", "Phoneme": "phoneme",
    "Picidae": "picidae", "SeizuresNeonatal": "seizures_neonatal", "SONYCUST": "sonycust",
    "SpeechCommands": "speech_commands", "UrbanSound": "urban_sound", "VocalSet": "vocalset",
    "VoiceGenderDetection": "voice_gender_detection", "Warblr": "warblr",
}
__all__, __getattr__, __dir__ = lazy_exports(__name__, CLASSES)
