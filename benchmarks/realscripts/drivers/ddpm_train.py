"""denoising-diffusion-pytorch's README usage (Unet + GaussianDiffusion + Trainer), tiny: a 16x16
Unet of width 8, 20 diffusion steps, 8 optimizer steps of 4 accumulated micro-batches of 4
images from ./images, no FID, no sampling. The training loop is the library's Trainer.train."""
import torch
from denoising_diffusion_pytorch import GaussianDiffusion, Trainer, Unet

torch.manual_seed(0)
model = Unet(dim=8, dim_mults=(1, 2), flash_attn=False)
diffusion = GaussianDiffusion(model, image_size=16, timesteps=20, sampling_timesteps=10)
trainer = Trainer(diffusion, "images", train_batch_size=4, gradient_accumulate_every=4,
                  train_lr=8e-5, train_num_steps=8, ema_decay=0.995, amp=False,
                  calculate_fid=False, save_and_sample_every=1000, results_folder="results")
trainer.train()
