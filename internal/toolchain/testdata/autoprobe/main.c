#include <stdio.h>
int autoprobe_answer(void);
int main(void) {
#if defined(__aarch64__)
    printf("aarch64 %d\n", autoprobe_answer());
#elif defined(__x86_64__)
    printf("x86_64 %d\n", autoprobe_answer());
#endif
    return 0;
}
