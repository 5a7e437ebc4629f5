"""Which file names are images, and of which format. Light (no nibabel): the job-kind
registry names the files a job takes with these."""

__all__ = ["NIFTI_SUFFIXES", "MIF_SUFFIXES", "IMAGE_SUFFIXES", "SINGLE_FILE_IMAGE_SUFFIXES"]

NIFTI_SUFFIXES = (".nii", ".nii.gz")
MIF_SUFFIXES = (".mif", ".mif.gz", ".mih")
#: Every image file name a job reads, NIfTI or MRtrix.
IMAGE_SUFFIXES = NIFTI_SUFFIXES + MIF_SUFFIXES
#: The images held in one file, the ones a job takes as uploads: an ``.mih`` header names
#: another file, its data, which an upload cannot bring along.
SINGLE_FILE_IMAGE_SUFFIXES = tuple(suffix for suffix in IMAGE_SUFFIXES if suffix != ".mih")
