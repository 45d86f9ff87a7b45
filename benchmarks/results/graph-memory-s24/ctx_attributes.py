"""Why a kept back-propagated loss can still hold tensors: backward frees what a custom autograd Function
saved with ``ctx.save_for_backward``, not what it put on ``ctx`` itself. CPU, host heap (glibc
``mallinfo2``) per step while ``total = total + loss`` keeps every step's graph; each step's activation
handed to the Function is 64 KB.

    python ctx_attributes.py > ctx_attributes.out
"""
import ctypes, torch
class MI(ctypes.Structure):
    _fields_=[(n,ctypes.c_size_t) for n in 'arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost'.split()]
libc=ctypes.CDLL('libc.so.6'); libc.mallinfo2.restype=MI
def used(): m=libc.mallinfo2(); return (m.uordblks+m.hblkhd)/2**20
class Keep(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, mode):
        if mode == 'attr': ctx.x = x
        else: ctx.save_for_backward(x)
        return x * 2
    @staticmethod
    def backward(ctx, g):
        return g * 2, None
for mode in ('saved', 'attr'):
    w = torch.randn(256, 256, requires_grad=True)
    total = 0
    for i in range(60):
        if i == 10: u0 = used()
        x = torch.randn(64, 1024) @ torch.randn(1024, 256)  # 64 KB activation per step
        y = Keep.apply(x @ w, mode)
        loss = y.sum()
        loss.backward()
        total = total + loss
    print(mode, 'MiB per step', round((used() - u0) / 50, 3))
